// Strings that come from the wire (a rank's host name, a failure reason, a collective's group)
// are shown on terminals, in the app and on the web page. Before a RunModel keeps one it goes
// through printable(): control characters (ESC and the rest of C0, and DEL) become '?', so a peer
// cannot move the monitor's cursor, retitle a terminal or forge table lines, and the length is
// capped, so it cannot bloat every view.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace shardlab::net {

// Group and operation names ("all_reduce", "dp[12]") are short: at most this many bytes are kept.
inline constexpr size_t kMaxLabelBytes = 64;
// Host names, job ids, failure reasons: at most this many bytes are kept.
inline constexpr size_t kMaxTextBytes = 512;

inline std::string printable(std::string_view text, size_t max_bytes = kMaxTextBytes) {
  std::string out(text.substr(0, max_bytes));
  for (char& c : out) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) c = '?';
  }
  if (text.size() > max_bytes) out += "...";
  return out;
}

}  // namespace shardlab::net
