#include "engine/train/slowdown.h"

#include <charconv>
#include <string_view>
#include <thread>

#include "engine/core/error.h"

namespace shardlab {

namespace {

bool parse_int(std::string_view s, long long& out) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

}  // namespace

Slowdown slowdown_for_rank(const std::string& spec, int rank) {
  Slowdown mine;
  std::string_view rest = spec;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view entry = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const size_t colon = entry.find(':');
    const size_t at = entry.find('@');
    long long r = 0, us = 0, from = 1;
    const bool ok =
        colon != std::string_view::npos && (at == std::string_view::npos || at > colon) &&
        parse_int(entry.substr(0, colon), r) &&
        parse_int(entry.substr(colon + 1, at == std::string_view::npos ? at : at - colon - 1),
                  us) &&
        (at == std::string_view::npos || parse_int(entry.substr(at + 1), from)) && r >= 0 &&
        us >= 0 && us <= 60'000'000 && from >= 1;
    SL_ENFORCE(ok,
               "{}: '{}' is not RANK:MICROSECONDS or RANK:MICROSECONDS@STEP (e.g. 2:20000, or "
               "1:3000@60 from step 60 on; at most 60 s, steps from 1)",
               kSlowRanksEnv, std::string(entry));
    if (r == rank) mine = {std::chrono::microseconds(us), from};
  }
  return mine;
}

void slow_down(std::chrono::microseconds d) {
  if (d.count() > 0) std::this_thread::sleep_for(d);
}

}  // namespace shardlab
