#include "net/web/plan_api.h"

#include <algorithm>
#include <map>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/plan/plan_inputs.h"

namespace shardlab::net {
namespace {

int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// application/x-www-form-urlencoded: '+' is a space, %XX a byte; a bad escape is kept as text.
std::string decode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
      out += static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::map<std::string, std::string, std::less<>> query_of(std::string_view target) {
  std::map<std::string, std::string, std::less<>> q;
  const size_t at = target.find('?');
  if (at == std::string_view::npos) return q;
  std::string_view rest = target.substr(at + 1);
  while (!rest.empty()) {
    const size_t amp = rest.find('&');
    const std::string_view pair = rest.substr(0, amp);
    const size_t eq = pair.find('=');
    if (!pair.empty())
      q[decode(pair.substr(0, eq))] =
          eq == std::string_view::npos ? "" : decode(pair.substr(eq + 1));
    if (amp == std::string_view::npos) break;
    rest = rest.substr(amp + 1);
  }
  return q;
}

}  // namespace

PlanApiReply plan_api(std::string_view target) {
  const auto query = query_of(target);
  const plan::FieldGetter get = [&](std::string_view name) -> std::optional<std::string> {
    const auto it = query.find(name);
    if (it == query.end()) return std::nullopt;
    return it->second;
  };
  try {
    plan::PlanInputs in = plan::read_plan_inputs(get, "");
    in.options.top = std::min<size_t>(in.options.top, 20);
    const plan::PlanResult r = plan::search_plans(in.job, in.cluster, in.options);
    return {200, plan::plans_to_json(in, r).dump()};
  } catch (const InvalidArgument& e) {
    return {400, nlohmann::json{{"error", std::string(e.what())}}.dump()};
  }
}

std::string plan_presets_json() {
  nlohmann::ordered_json models = nlohmann::ordered_json::array();
  for (const plan::ModelPreset& m : plan::model_presets())
    models.push_back({{"name", m.name},
                      {"source", m.source},
                      {"layers", m.shape.layers},
                      {"hidden", m.shape.hidden},
                      {"heads", m.shape.heads},
                      {"ffn", m.shape.ffn_width()},
                      {"seq", m.shape.seq},
                      {"vocab", m.shape.vocab}});
  return nlohmann::ordered_json{{"models", models}, {"gpus", plan::gpu_names()}}.dump();
}

}  // namespace shardlab::net
