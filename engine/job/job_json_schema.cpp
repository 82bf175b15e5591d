#include "engine/job/job_json_schema.h"

#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include <string>
#include <vector>

#include "engine/core/error.h"
#include "engine/job/job_fields.h"

namespace shardlab {

namespace {

using Json = nlohmann::ordered_json;

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : sep) + s;
  return out;
}

// "used when model.kind is gpt", from the field's tests (any of them).
std::string used_when(const JobField& f) {
  std::vector<std::string> tests;
  for (const FieldTest& t : f.used_when) {
    switch (t.op) {
      case FieldTest::Op::one_of:
        tests.push_back(fmt::format("{} is {}", t.path, join(t.values, " or ")));
        break;
      case FieldTest::Op::none_of:
        tests.push_back(fmt::format("{} is not {}", t.path, join(t.values, " or ")));
        break;
      case FieldTest::Op::above:
        tests.push_back(fmt::format("{} > {}", t.path, t.threshold));
        break;
      case FieldTest::Op::not_empty:
        tests.push_back(fmt::format("{} is set", t.path));
        break;
    }
  }
  return tests.empty() ? "" : "Used when " + join(tests, ", or when ") + ".";
}

Json type_of(const JobField& f) {
  Json s;
  switch (f.type) {
    case FieldType::string:
      s["type"] = "string";
      if (!f.choices.empty()) s["enum"] = f.choices;
      break;
    case FieldType::boolean:
      s["type"] = "boolean";
      break;
    case FieldType::number:
      s["type"] = "number";
      break;
    case FieldType::integer:
      s["type"] = "integer";
      break;
    case FieldType::unsigned_integer:
      s["type"] = "integer";
      s["minimum"] = 0;
      break;
    case FieldType::integer_list:
      s["type"] = "array";
      s["items"] = Json{{"type", "integer"}};
      break;
    case FieldType::string_list:
      s["type"] = "array";
      s["items"] = Json{{"type", "string"}};
      break;
  }
  if (f.min) s["minimum"] = *f.min;
  if (f.max) s["maximum"] = *f.max;
  return s;
}

Json section() {
  return Json{{"type", "object"}, {"additionalProperties", false}, {"properties", Json::object()}};
}

}  // namespace

nlohmann::ordered_json job_json_schema() {
  Json root =
      Json{{"$schema", "https://json-schema.org/draft/2020-12/schema"},
           {"title", "ShardLab job"},
           {"description",
            "A ShardLab job file (shardlab run JOB.json). Every field is optional: a missing "
            "one takes its default. Generated from the engine's job field table by shardlab "
            "job-schema."},
           {"type", "object"},
           {"additionalProperties", false},
           {"properties", Json::object()}};
  for (const JobField& f : job_fields()) {
    Json* node = &root;
    size_t start = 0;
    for (size_t dot = f.path.find('.'); dot != std::string::npos; dot = f.path.find('.', start)) {
      const std::string key = f.path.substr(start, dot - start);
      Json& props = (*node)["properties"];
      if (!props.contains(key)) props[key] = section();
      node = &props[key];
      SL_ENFORCE_T(InternalError, node->value("type", "") == "object",
                   "job-schema: '{}' is both a field and a section", f.path);
      start = dot + 1;
    }
    Json s = type_of(f);
    s["default"] = f.default_value;
    std::string description = used_when(f);
    if (!f.choices.empty())
      description =
          "One of " + join(f.choices, ", ") + "." + (description.empty() ? "" : " ") + description;
    if (!description.empty()) s["description"] = description;
    (*node)["properties"][f.path.substr(start)] = s;
  }
  return root;
}

}  // namespace shardlab
