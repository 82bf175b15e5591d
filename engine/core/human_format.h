// Numbers for people: byte counts in binary units and lists of ranks, written one way wherever
// ShardLab prints them (the run summary, the flight record, the monitor, the benches, the app).
//
//   human_bytes(1536)                         "1.5 KiB"
//   human_bytes(3 << 30, {.gib_decimals = 2}) "3.00 GiB"
//   human_bytes(15 << 10, {.step_up = 10})    "15360 B": a unit is used from 10 of it on, so
//                                             figures keep 3-4 significant digits
//   human_bytes(65536, {.whole = true})       "64 KiB": whole units, for power-of-two sizes
//   rank_list({3})                            "3"
//   rank_list({1, 2, 5})                      "1, 2, 5"
//   rank_list({1, 2, 5}, {.last = " and "})   "1, 2 and 5"
//   rank_list({1, 2}, {.label = true})        "ranks 1, 2" ("rank 3" for one)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace shardlab {

struct ByteUnits {
  int step_up = 1;       // a unit (KiB, MiB, GiB) is used from step_up of it on
  int decimals = 1;      // for KiB and MiB
  int gib_decimals = 1;  // for GiB
  bool whole = false;    // whole units, rounded down (B, KiB, MiB only), no decimals
};

// Bytes in B, KiB, MiB or GiB (powers of 1024).
std::string human_bytes(int64_t bytes, const ByteUnits& units = {});

struct RankListStyle {
  std::string_view last = ", ";  // between the last two ranks
  bool label = false;            // "rank " or "ranks " first
};

std::string rank_list(const std::vector<int>& ranks, const RankListStyle& style = {});

}  // namespace shardlab
