// `--json` on the shardlab commands: one JSON document on stdout, nothing else there. The human
// text (tables, progress lines, headers) goes to stderr while the command works, so that a script
// reads stdout whole with one JSON parser and a person still sees what happens.
//
// Field names carry their units: "_seconds", "_ms", "_bytes", "_per_second", "gb_per_second"
// (GB = 1e9 bytes). Each command's help (shardlab help COMMAND) lists its fields.
#pragma once

#include <nlohmann/json.hpp>

namespace shardlab::cli {

using Json = nlohmann::ordered_json;

// While alive, everything this process (and any process it starts) writes to its standard output
// goes to its standard error instead: fd 1 is pointed at fd 2 and restored on destruction. Both
// C stdio and std::cout are flushed at each switch so nothing crosses over. Inactive (does
// nothing) when `active` is false.
class StdoutToStderr {
 public:
  explicit StdoutToStderr(bool active);
  ~StdoutToStderr();
  StdoutToStderr(const StdoutToStderr&) = delete;
  StdoutToStderr& operator=(const StdoutToStderr&) = delete;
  // Restores stdout now (before the JSON document is printed); idempotent.
  void restore();

 private:
  int saved_ = -1;
};

// Prints `doc` to stdout as one document (indented, a final newline) and flushes.
void print_json(const Json& doc);

}  // namespace shardlab::cli
