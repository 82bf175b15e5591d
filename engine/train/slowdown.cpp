#include "engine/train/slowdown.h"

#include <charconv>
#include <cstdlib>
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

std::chrono::microseconds slowdown_for_rank(const std::string& spec, int rank) {
  std::chrono::microseconds mine{0};
  std::string_view rest = spec;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view entry = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const size_t colon = entry.find(':');
    long long r = 0, us = 0;
    SL_ENFORCE(colon != std::string_view::npos && parse_int(entry.substr(0, colon), r) &&
                   parse_int(entry.substr(colon + 1), us) && r >= 0 && us >= 0 && us <= 60'000'000,
               "{}: '{}' is not RANK:MICROSECONDS (e.g. 2:20000, at most 60 s)", kSlowRanksEnv,
               std::string(entry));
    if (r == rank) mine = std::chrono::microseconds(us);
  }
  return mine;
}

std::chrono::microseconds test_slowdown(int rank) {
  const char* env = std::getenv(kSlowRanksEnv);
  return env == nullptr ? std::chrono::microseconds(0) : slowdown_for_rank(env, rank);
}

void slow_down(std::chrono::microseconds d) {
  if (d.count() > 0) std::this_thread::sleep_for(d);
}

}  // namespace shardlab
