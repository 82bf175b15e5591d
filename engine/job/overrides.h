// Command-line overrides of a job document: `--set optimizer.lr=0.01`.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <string_view>

namespace shardlab {

// Applies one "dotted.key=value" assignment to `doc`. The value is parsed as JSON when it parses
// (numbers, true/false, null, arrays such as [128,64], quoted strings) and taken as a plain string
// otherwise (so "optimizer.name=sgd" works). Missing objects along the path are created. Throws
// InvalidArgument when there is no '=', the key is empty or has an empty segment ("a..b"), or a
// path segment names a value that is not an object, and "KEY: nested deeper than 64 levels" /
// "KEY[1]: 1e400 is out of range (not a finite number)" when the value (with the key's segments)
// nests deeper than kMaxJsonDepth or holds a number beyond double's range
// (engine/core/json_limits.h). Unknown keys are left for validation to report.
void apply_override(nlohmann::json& doc, std::string_view assignment);

}  // namespace shardlab
