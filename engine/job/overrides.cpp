#include "engine/job/overrides.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "engine/core/display_text.h"
#include "engine/core/error.h"
#include "engine/core/json_limits.h"

namespace shardlab {

namespace {

std::string_view trim(std::string_view s) {
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace

void apply_override(nlohmann::json& doc, std::string_view assignment) {
  // The assignment as messages show it (a --set value typed or pasted with a control character).
  const std::string shown = display_text(assignment, kMaxDisplayPathBytes);
  const size_t eq = assignment.find('=');
  SL_ENFORCE(eq != std::string_view::npos, "override \"{}\": expected key=value", shown);
  const std::string_view key = trim(assignment.substr(0, eq));
  const std::string_view text = trim(assignment.substr(eq + 1));
  SL_ENFORCE(!key.empty(), "override \"{}\": the key before '=' is empty", shown);

  std::vector<std::string> segments;
  for (size_t start = 0;;) {
    const size_t dot = key.find('.', start);
    segments.emplace_back(key.substr(start, dot - start));
    SL_ENFORCE(!segments.back().empty(), "override \"{}\": empty segment in key \"{}\"", shown,
               display_text(key, kMaxDisplayPathBytes));
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }

  // Checked on the text first, like a job file's (engine/core/json_limits.h): the key's segments
  // are the levels that hold the value, and a number beyond double's range is named by its field
  // instead of becoming the string "1e400".
  if (const auto problem = json_text_problem(text, static_cast<int>(segments.size()))) {
    const std::string& inner = problem->field;
    SL_THROW(InvalidArgument, "{}{}{}: {}", display_text(key, kMaxDisplayPathBytes),
             inner.empty() || inner[0] == '[' ? "" : ".", inner, problem->message);
  }

  // JSON when it parses (0.01, true, [128,64], "quoted"), the raw text otherwise (sgd).
  nlohmann::json value = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) value = std::string(text);

  if (doc.is_null()) doc = nlohmann::json::object();
  nlohmann::json* node = &doc;
  std::string path;
  for (size_t i = 0; i < segments.size(); ++i) {
    SL_ENFORCE(node->is_object(), "override \"{}\": {} is not an object", shown,
               path.empty() ? "the job" : display_text(path, kMaxDisplayPathBytes));
    path += (path.empty() ? "" : ".") + segments[i];
    if (i + 1 == segments.size()) {
      (*node)[segments[i]] = std::move(value);
    } else {
      nlohmann::json& child = (*node)[segments[i]];
      if (child.is_null()) child = nlohmann::json::object();
      node = &child;
    }
  }
}

}  // namespace shardlab
