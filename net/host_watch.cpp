#include "net/host_watch.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace shardlab::net {
namespace {

constexpr const char* kPrefix = "host ";
constexpr const char* kLost = " lost ";

}  // namespace

std::string LostHost::line() const {
  std::string list;
  for (int r : ranks) list += (list.empty() ? "" : ", ") + std::to_string(r);
  return fmt::format("{}{} ({} {}){}{}: no answer for {:.0f} s", kPrefix, host,
                     ranks.size() == 1 ? "rank" : "ranks", list, kLost,
                     step > 0 ? fmt::format("at step {}", step) : "before its first step",
                     std::max(0.0, std::floor(silent_seconds)));
}

std::string lost_host_of(const std::string& reason) {
  if (!reason.starts_with(kPrefix)) return "";
  const size_t open = reason.find(" (rank");
  const size_t lost = reason.find(kLost);
  if (open == std::string::npos || lost == std::string::npos || lost < open) return "";
  return reason.substr(std::string(kPrefix).size(), open - std::string(kPrefix).size());
}

void HostWatch::hello(int rank, const std::string& host, double now) {
  Rank& r = ranks_[rank];
  r = Rank{};
  r.host = host;
  r.last = now;
  named_.erase(host);  // a host back (a restored link, a new job) can be lost again
}

void HostWatch::heard(int rank, double now, int64_t step) {
  auto it = ranks_.find(rank);
  if (it == ranks_.end()) return;
  it->second.last = std::max(it->second.last, now);
  if (step > it->second.step) it->second.step = step;
}

void HostWatch::ended(int rank, double now) {
  auto it = ranks_.find(rank);
  if (it == ranks_.end() || it->second.ended) return;
  it->second.ended = true;
  it->second.last = std::max(it->second.last, now);
}

std::vector<LostHost> HostWatch::lost_where(double now, bool at_end) {
  // Per host: its ranks, whether any has ended, its last word.
  struct Host {
    std::vector<int> ranks;
    bool any_ended = false, all_ended = true;
    double last = 0;
    int64_t step = 0;
  };
  std::map<std::string, Host> hosts;
  for (const auto& [id, r] : ranks_) {
    Host& h = hosts[r.host];
    h.ranks.push_back(id);
    h.any_ended = h.any_ended || r.ended;
    h.all_ended = h.all_ended && r.ended;
    h.last = std::max(h.last, r.last);
    h.step = std::max(h.step, r.step);
  }
  std::vector<LostHost> out;
  if (hosts.size() < 2) return out;
  for (const auto& [name, h] : hosts) {
    if (h.any_ended || named_.count(name) > 0) continue;
    bool others_ok = true;  // (at_end) every other host's ranks have ended
    double others_last = 0;
    for (const auto& [other, o] : hosts) {
      if (other == name) continue;
      others_ok = others_ok && o.all_ended;
      others_last = std::max(others_last, o.last);
    }
    const double silent = now - h.last;
    const bool lost = at_end
                          ? others_ok
                          : silent >= options_.silence && others_last >= h.last + options_.evidence;
    if (!lost) continue;
    named_.insert(name);
    out.push_back({name, h.ranks, h.step, silent});
  }
  return out;
}

std::vector<LostHost> HostWatch::check(double now) {
  return lost_where(now, false);
}

std::vector<LostHost> HostWatch::settle(double now) {
  return lost_where(now, true);
}

}  // namespace shardlab::net
