#include "engine/core/human_format.h"

#include <fmt/format.h>

namespace shardlab {

std::string human_bytes(int64_t bytes, const ByteUnits& units) {
  constexpr int64_t kKi = 1024, kMi = kKi * 1024, kGi = kMi * 1024;
  if (units.whole) {
    if (bytes >= kMi) return fmt::format("{} MiB", bytes / kMi);
    if (bytes >= kKi) return fmt::format("{} KiB", bytes / kKi);
    return fmt::format("{} B", bytes);
  }
  const double b = static_cast<double>(bytes);
  const int64_t up = units.step_up;
  if (bytes < up * kKi) return fmt::format("{} B", bytes);
  if (bytes < up * kMi) return fmt::format("{:.{}f} KiB", b / kKi, units.decimals);
  if (bytes < up * kGi) return fmt::format("{:.{}f} MiB", b / kMi, units.decimals);
  return fmt::format("{:.{}f} GiB", b / kGi, units.gib_decimals);
}

std::string rank_list(const std::vector<int>& ranks, const RankListStyle& style) {
  std::string s;
  if (style.label) s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) s += i + 1 == ranks.size() ? style.last : std::string_view(", ");
    s += std::to_string(ranks[i]);
  }
  return s;
}

}  // namespace shardlab
