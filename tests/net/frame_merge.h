// The page's merge of the dashboard's frames, written here from the wire format's description
// (resources/web/README.md), not from the server's code, for the suites that check frames:
// tst_dashboard_frames (FrameBuilder's frames, merged and compared with full_state()) and
// tst_web_viewers (what a WebSocket viewer receives, merged and compared with /api/run).
//
// apply_frame(): full replaces everything. delta: a missing section is unchanged; job, replay,
// diagnosis, comm, timeline replace; ranks is {"index": row} of the changed rows; loss and evals
// append their points at index `from` (older points kept); heat replaces or adds the columns it
// carries and drops those outside first..last. unchanged_in_delta(): what a delta carries that
// did not change (the format sends only the sections that changed).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace shardlab::test {

// Merges `frame` into `state` as the page does. Returns "" or what was wrong with the frame.
inline std::string apply_frame(nlohmann::json& state, const nlohmann::json& frame) {
  using nlohmann::json;
  if (!frame.is_object() || !frame.contains("type") || !frame["type"].is_string())
    return "not a frame";
  const std::string type = frame["type"];
  if (type == "full") {
    state = frame;
    return "";
  }
  if (type != "delta") return "unknown type " + type;
  if (!state.is_object()) return "a delta before any full frame";
  for (const auto& [key, value] : frame.items()) {
    if (key == "ranks") {
      if (!value.is_object()) return "delta ranks is not an object";
      json& ranks = state["ranks"];
      for (const auto& [index, row] : value.items()) {
        if (index.empty() || index.find_first_not_of("0123456789") != std::string::npos)
          return "bad rank index " + index;
        const size_t i = std::stoul(index);
        while (ranks.size() <= i) ranks.push_back(nullptr);
        ranks[i] = row;
      }
    } else if (key == "loss" || key == "evals") {
      if (!value.is_object() || !value.contains("from") || !value.contains("points") ||
          !value["points"].is_array())
        return key + " malformed";
      const size_t from = value.at("from").get<size_t>();
      const json& old = state[key]["points"];
      if (from > old.size()) return key + ": from past the points held";
      json points = json::array();
      for (size_t i = 0; i < from; ++i) points.push_back(old[i]);
      for (const json& p : value.at("points")) points.push_back(p);
      state[key] = json{{"from", 0}, {"points", points}};
    } else if (key == "heat") {
      if (!value.is_object() || !value.contains("first") || !value.contains("last") ||
          !value.contains("cols") || !value["cols"].is_array())
        return "heat malformed";
      const int64_t first = value.at("first"), last = value.at("last");
      std::map<int64_t, json> cols;
      for (const json& c : state["heat"]["cols"]) cols[c[0].get<int64_t>()] = c;
      for (const json& c : value.at("cols")) cols[c[0].get<int64_t>()] = c;
      json out = json::array();
      for (const auto& [step, c] : cols)
        if (step >= first && step <= last) out.push_back(c);
      state["heat"] = json{{"first", first}, {"last", last}, {"cols", out}};
    } else {
      state[key] = value;  // type, frame, now and the replaced sections
    }
  }
  return "";
}

// What `delta` carries that did not change against `state` (the state before it is merged):
// rank rows as they were, loss or evals without points or not from the count held, other
// sections equal to what is held. "" when it carries only changes.
inline std::string unchanged_in_delta(const nlohmann::json& state, const nlohmann::json& delta) {
  std::string out;
  for (const auto& [key, value] : delta.items()) {
    if (key == "type" || key == "frame" || key == "now") continue;
    if (key == "ranks") {
      for (const auto& [index, row] : value.items()) {
        const size_t i = std::stoul(index);
        if (i < state["ranks"].size() && state["ranks"][i] == row) out += "rank row " + index + " ";
      }
    } else if (key == "loss" || key == "evals") {
      if (value["points"].empty()) out += key + " without points ";
      if (value["from"].get<size_t>() != state[key]["points"].size())
        out += key + " from " + value["from"].dump() + " with " +
               std::to_string(state[key]["points"].size()) + " held ";
    } else if (key != "heat" && state.contains(key) && state[key] == value) {
      out += key + " ";
    }
  }
  return out;
}

}  // namespace shardlab::test
