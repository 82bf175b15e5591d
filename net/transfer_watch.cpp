#include "net/transfer_watch.h"

#include <fmt/format.h>

#include <cmath>

namespace shardlab::net {
namespace {

std::string kind_of(const std::string& group) {
  return group.substr(0, group.find('['));
}

std::string gbps_text(double v) {
  return v >= 0.1 ? fmt::format("{:.2g} GB/s", v) : fmt::format("{:.2g} MB/s", v * 1000);
}

}  // namespace

void TransferWatch::add(const telemetry::Event& event) {
  const auto* c = std::get_if<telemetry::CollectiveEvent>(&event.payload);
  if (c == nullptr || !c->ok || c->wait < 0 || c->bytes <= 0) return;
  if (!std::isfinite(c->duration) || !std::isfinite(c->busbw) || c->busbw <= 0) return;
  const double transfer = c->duration - std::min(c->wait, c->duration);
  if (!(transfer > 0)) return;
  const std::string kind = kind_of(c->group);
  if (kind.empty() || kinds_.size() >= 16) return;  // tp, pp, dp, world and a few more
  Kind& k = kinds_[kind];
  const double end = event.time;
  const double bus = c->busbw * c->duration;
  if (k.first < 0) k.first = end;
  if (end - k.first <= kBaselineSeconds) {
    k.base_bus += bus;
    k.base_transfer += transfer;
    return;
  }
  k.recent.push_back({end, bus, transfer});
  k.recent_bus += bus;
  k.recent_transfer += transfer;
  while (!k.recent.empty() && k.recent.front().end < end - kRecentSeconds) {
    k.recent_bus -= k.recent.front().bus_bytes;
    k.recent_transfer -= k.recent.front().transfer;
    k.recent.pop_front();
  }
}

double TransferWatch::baseline(const std::string& kind) const {
  const auto it = kinds_.find(kind);
  if (it == kinds_.end() || it->second.base_transfer <= 0) return 0;
  return it->second.base_bus / it->second.base_transfer;
}

double TransferWatch::recent(const std::string& kind) const {
  const auto it = kinds_.find(kind);
  if (it == kinds_.end() || it->second.recent.empty() || it->second.recent_transfer <= 0) return 0;
  return it->second.recent_bus / it->second.recent_transfer;
}

std::optional<SlowTransfers> TransferWatch::slow() const {
  std::optional<SlowTransfers> worst;
  for (const auto& [kind, k] : kinds_) {
    // Judged once the recent window spans most of its length (a few collectives are noise).
    if (k.recent.size() < 3 || k.recent.back().end - k.recent.front().end < kRecentSeconds / 2)
      continue;
    const double base = baseline(kind), now = recent(kind);
    if (base <= 0 || now <= 0 || now * kSlowFactor >= base) continue;
    if (worst && now / base >= worst->recent_gb_per_s / worst->baseline_gb_per_s) continue;
    worst = SlowTransfers{
        kind, now, base,
        fmt::format("{} transfers at {} against {} in the first {:.0f} s — a link is slow; run "
                    "shardlab doctor --hosts to find it",
                    kind, gbps_text(now), gbps_text(base), kBaselineSeconds)};
  }
  return worst;
}

bool TransferWatch::slow_lately() const {
  for (const auto& [kind, k] : kinds_) {
    const double base = baseline(kind);
    if (base <= 0 || k.recent.empty()) continue;
    const double from = k.recent.back().end - kLatelySeconds;
    double bus = 0, transfer = 0;
    size_t n = 0;
    for (auto it = k.recent.rbegin(); it != k.recent.rend() && it->end >= from; ++it, ++n) {
      bus += it->bus_bytes;
      transfer += it->transfer;
    }
    if (n >= 3 && transfer > 0 && (bus / transfer) * kSlowFactor < base) return true;
  }
  return false;
}

}  // namespace shardlab::net
