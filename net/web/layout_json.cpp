#include "net/web/layout_json.h"

#include <fmt/format.h>

#include <iterator>

#include "engine/core/json_text.h"

namespace shardlab::net {

namespace {

using Out = std::back_insert_iterator<std::string>;

void put_ranges(std::string& o, const std::vector<telemetry::LayoutRange>& ranges) {
  o += '[';
  for (size_t i = 0; i < ranges.size(); ++i)
    fmt::format_to(Out(o), "{}[{},{}]", i ? "," : "", ranges[i].begin, ranges[i].end);
  o += ']';
}

void put_rank(std::string& o, int rank, const telemetry::LayoutEvent& l) {
  fmt::format_to(Out(o), "{{\"rank\":{},\"strategy\":", rank);
  append_json_string(o, l.strategy);
  o += ",\"held\":{\"params\":";
  put_ranges(o, l.params);
  o += ",\"grads\":";
  put_ranges(o, l.grads);
  o += ",\"optimizer_state\":";
  put_ranges(o, l.optimizer_state);
  o += "},\"state_arrays\":[";
  for (size_t i = 0; i < l.state_arrays.size(); ++i) {
    if (i) o += ',';
    append_json_string(o, l.state_arrays[i]);
  }
  fmt::format_to(Out(o),
                 "],\"padding\":{{\"params\":{},\"grads\":{},\"optimizer_state\":{}}},"
                 "\"planned\":{{\"params\":{},\"grads\":{},\"optimizer_state\":{}}},\"formula\":",
                 l.params_padding, l.grads_padding, l.state_padding, l.planned[0], l.planned[1],
                 l.planned[2]);
  append_json_string(o, l.formula);
  o += ",\"units\":[";
  for (size_t i = 0; i < l.units.size(); ++i) {
    if (i) o += ',';
    put_ranges(o, l.units[i]);
  }
  fmt::format_to(Out(o), "],\"truncated\":{}}}", l.truncated ? "true" : "false");
}

}  // namespace

std::string layout_section(const RunModel& model) {
  const telemetry::LayoutEvent* first = nullptr;
  for (const auto& [rank, r] : model.ranks())
    if (r.layout) {
      first = &*r.layout;
      break;
    }
  if (first == nullptr) return "null";
  std::string o = "{\"tensors\":[";
  for (size_t i = 0; i < first->tensors.size(); ++i) {
    const telemetry::LayoutTensor& t = first->tensors[i];
    o += i ? ",{\"name\":" : "{\"name\":";
    append_json_string(o, t.name);
    fmt::format_to(Out(o), ",\"offset\":{},\"size\":{}}}", t.offset, t.size);
  }
  fmt::format_to(Out(o), "],\"bytes_per_element\":{},\"ranks\":[", first->bytes_per_element);
  bool any = false;
  for (const auto& [rank, r] : model.ranks()) {
    if (!r.layout) continue;
    if (any) o += ',';
    any = true;
    put_rank(o, rank, *r.layout);
  }
  o += "]}";
  return o;
}

}  // namespace shardlab::net
