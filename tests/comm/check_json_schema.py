#!/usr/bin/python3
"""Checks JSON files against a JSON Schema with python3-jsonschema (an independent validator).

    check_json_schema.py SCHEMA FILE...

Exit status: 0 every file is valid; 1 one is not (a line on stderr per error: file, path, why);
2 jsonschema is missing, or SCHEMA is not a valid schema (the caller skips or fails).
"""
import json
import sys

try:
    import jsonschema
    from jsonschema.validators import validator_for
except ImportError:
    print("missing Python module: jsonschema (apt-get install python3-jsonschema)", file=sys.stderr)
    sys.exit(2)


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(sys.argv[1], encoding="utf-8") as f:
        schema = json.load(f)
    cls = validator_for(schema)
    try:
        cls.check_schema(schema)
    except jsonschema.exceptions.SchemaError as e:
        print(f"{sys.argv[1]}: not a valid {cls.__name__} schema: {e.message}", file=sys.stderr)
        return 2
    validator = cls(schema)
    bad = 0
    for path in sys.argv[2:]:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        for error in validator.iter_errors(doc):
            where = "/".join(str(p) for p in error.absolute_path) or "(top)"
            print(f"{path}: {where}: {error.message}", file=sys.stderr)
            bad += 1
    print(f"{len(sys.argv) - 2} file(s) checked against {sys.argv[1]} ({cls.__name__}): "
          f"{bad} error(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
