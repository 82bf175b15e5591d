#include "engine/doctor/cluster_checks.h"

#include <nlohmann/json.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <map>

#include "engine/bench/harness.h"
#include "engine/bench/triad.h"
#include "engine/comm/communicator.h"
#include "engine/core/error.h"
#include "engine/core/timer.h"
#include "kernels/cpu/gemm.h"

namespace shardlab::doctor {
namespace {

// --- The rules' thresholds. None is fitted to a measurement; each is the size of a fault. ---

// A link below 1/3 of the others. Ping-pong bandwidth on a healthy network varies with the
// traffic beside it and the TCP window by perhaps +-30% between pairs (the healthy case of
// tst_cluster_judge): at most a ratio of 0.7/1.3 = 0.54, well clear of 1/3. The faults that hurt
// a job are larger: a NIC negotiated down (25 -> 10 GbE, 10 -> 1 GbE), traffic routed over a
// management network, a bad cable retransmitting; an all-reduce ring runs at its slowest link.
constexpr double kSlowLinkFraction = 1.0 / 3.0;
// Latency above 3x the others: the same margin the other way round (1.3/0.7 = 1.86 < 3). A
// route through an extra hop or a congested switch costs more than that.
constexpr double kSlowLatencyFactor = 3.0;
// GEMM or memory below 60% of the other hosts' median. Single-thread sgemm and triad on like
// hosts agree within turbo and frequency spread (about +-10-20%); 60% tolerates a spread of +-25%
// ((1 - 0.25) / (1 + 0.25) = 0.6) and still catches a core shared with one other busy process
// (about 50%), a power-capped or throttled host, or an older CPU or OpenBLAS kernel.
constexpr double kSlowComputeFraction = 0.6;

// Host names travel as one float per byte (the Communicator carries float32; 0-255 are exact).
constexpr int kNameFloats = 256;
constexpr int kTagBandwidth = 7101;
constexpr int kTagLatency = 7102;
constexpr int kLatencyWarmup = 3;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}

std::string this_host() {
  std::array<char, 256> buf{};
  if (::gethostname(buf.data(), buf.size() - 1) != 0) return "unknown";
  return buf.data();
}

// Sets OpenBLAS to one thread while alive, then restores the caller's count.
class OneBlasThread {
 public:
  OneBlasThread() : saved_(kernels::blas_threads()) { kernels::set_blas_threads(1); }
  ~OneBlasThread() { kernels::set_blas_threads(saved_); }
  OneBlasThread(const OneBlasThread&) = delete;
  OneBlasThread& operator=(const OneBlasThread&) = delete;

 private:
  int saved_;
};

double gemm_gflops(int n, int reps) {
  const OneBlasThread one;
  const auto size = static_cast<size_t>(n) * static_cast<size_t>(n);
  std::vector<float> a(size), b(size), c(size, 0.0f);
  for (size_t i = 0; i < size; ++i) {
    a[i] = static_cast<float>(i % 7) * 0.25f;
    b[i] = static_cast<float>(i % 5) * 0.5f;
  }
  const double best = bench::best(bench::time_each(1, reps, [&] {
    kernels::gemm(kernels::Trans::No, kernels::Trans::No, n, n, n, 1.0f, a.data(), n, b.data(), n,
                  0.0f, c.data(), n);
  }));
  return 2.0 * n * n * static_cast<double>(n) / best / 1e9;
}

struct PairFigures {
  double gb_per_s = 0;
  double latency_us = 0;
};

// Rank `a`'s side of the ping-pong with `peer`: sends first, times the round trips.
PairFigures ping(Communicator& world, int peer, const ClusterOptions& o) {
  std::vector<float> big(static_cast<size_t>(o.message_bytes / 4), 1.0f);
  std::vector<float> one(1, 0.0f);
  double best = 0;
  for (int rep = 0; rep <= o.bandwidth_reps; ++rep) {  // rep 0: warm-up (connection, pages)
    const Stopwatch t;
    world.send(big, peer, kTagBandwidth);
    world.recv(big, peer, kTagBandwidth);
    const double s = std::max(t.seconds(), bench::kMinSeconds);
    if (rep > 0 && (best == 0 || s < best)) best = s;
  }
  std::vector<double> round_trips;
  for (int i = 0; i < kLatencyWarmup + o.latency_round_trips; ++i) {
    const Stopwatch t;
    world.send(one, peer, kTagLatency);
    world.recv(one, peer, kTagLatency);
    if (i >= kLatencyWarmup) round_trips.push_back(t.seconds());
  }
  PairFigures f;
  f.gb_per_s = 2.0 * static_cast<double>(big.size() * sizeof(float)) / best / 1e9;
  f.latency_us = median(round_trips) / 2 * 1e6;
  return f;
}

// Rank `b`'s side: answers each message with one of the same size.
void pong(Communicator& world, int peer, const ClusterOptions& o) {
  std::vector<float> big(static_cast<size_t>(o.message_bytes / 4));
  std::vector<float> one(1);
  for (int rep = 0; rep <= o.bandwidth_reps; ++rep) {
    world.recv(big, peer, kTagBandwidth);
    world.send(big, peer, kTagBandwidth);
  }
  for (int i = 0; i < kLatencyWarmup + o.latency_round_trips; ++i) {
    world.recv(one, peer, kTagLatency);
    world.send(one, peer, kTagLatency);
  }
}

}  // namespace

ClusterMeasurements measure_cluster(Communicator& world, const ClusterOptions& o) {
  SL_ENFORCE(o.gemm_n >= 1 && o.gemm_reps >= 1 && o.triad_n >= 1 && o.triad_reps >= 1 &&
                 o.compute_rounds >= 1 && o.message_bytes >= 4 && o.bandwidth_reps >= 1 &&
                 o.latency_round_trips >= 1,
             "doctor --cluster: every size and repetition count must be positive (gemm_n {}, "
             "triad_n {}, message_bytes {})",
             o.gemm_n, o.triad_n, o.message_bytes);
  const Stopwatch total;
  const int n = world.size();
  const int me = world.rank();
  const auto un = static_cast<size_t>(n);

  // Host names.
  std::vector<float> name(kNameFloats, 0.0f), names(kNameFloats * un);
  const std::string host = this_host();
  for (size_t i = 0; i < host.size() && i + 1 < kNameFloats; ++i)
    name[i] = static_cast<float>(static_cast<unsigned char>(host[i]));
  world.all_gather(name, names);

  // GEMM and memory, one host at a time (the others wait at the barrier meanwhile), in rounds;
  // each host keeps its best.
  std::vector<float> mine(2, 0.0f), compute(2 * un);
  for (int round = 0; round < o.compute_rounds; ++round)
    for (int turn = 0; turn < n; ++turn) {
      if (turn == me) {
        mine[0] = std::max(mine[0], static_cast<float>(gemm_gflops(o.gemm_n, o.gemm_reps)));
        mine[1] =
            std::max(mine[1], static_cast<float>(measure_triad(o.triad_n, o.triad_reps).gb_per_s));
      }
      world.barrier();
    }
  world.all_gather(mine, compute);

  // Pairs, one at a time; the lower rank records, and one sum gives every rank the matrices.
  std::vector<float> pairs(2 * un * un, 0.0f);
  for (int a = 0; a < n; ++a)
    for (int b = a + 1; b < n; ++b) {
      if (me == a) {
        const PairFigures f = ping(world, b, o);
        pairs[a * un + b] = pairs[b * un + a] = static_cast<float>(f.gb_per_s);
        pairs[un * un + a * un + b] = pairs[un * un + b * un + a] =
            static_cast<float>(f.latency_us);
      } else if (me == b) {
        pong(world, a, o);
      }
      world.barrier();
    }
  world.all_reduce(pairs, ReduceOp::Sum);

  ClusterMeasurements m;
  m.link_gb_per_s.assign(un, std::vector<double>(un, 0.0));
  m.latency_us.assign(un, std::vector<double>(un, 0.0));
  for (size_t r = 0; r < un; ++r) {
    ClusterHost h;
    h.rank = static_cast<int>(r);
    for (size_t i = 0; i < kNameFloats; ++i) {
      const auto c = static_cast<int>(names[r * kNameFloats + i]);
      if (c == 0) break;
      h.host.push_back(static_cast<char>(c));
    }
    h.gemm_gflops = compute[2 * r];
    h.memory_gb_per_s = compute[2 * r + 1];
    m.hosts.push_back(h);
    for (size_t c = 0; c < un; ++c) {
      m.link_gb_per_s[r][c] = pairs[r * un + c];
      m.latency_us[r][c] = pairs[un * un + r * un + c];
    }
  }
  m.seconds = total.seconds();
  return m;
}

std::string bandwidth_text(double gb_per_s) {
  if (!std::isfinite(gb_per_s) || gb_per_s < 0) return "n/a";
  const double bytes = gb_per_s * 1e9;
  if (bytes >= 999.5e6) return fmt::format("{:.3g} GB/s", bytes / 1e9);
  if (bytes >= 999.5e3) return fmt::format("{:.3g} MB/s", bytes / 1e6);
  if (bytes >= 999.5) return fmt::format("{:.3g} kB/s", bytes / 1e3);
  return fmt::format("{:.3g} B/s", bytes);
}

std::string latency_text(double us) {
  if (!std::isfinite(us) || us < 0) return "n/a";
  if (us >= 999.5e3) return fmt::format("{:.3g} s", us / 1e6);
  if (us >= 999.5) return fmt::format("{:.3g} ms", us / 1e3);
  return fmt::format("{:.3g} us", us);
}

ClusterVerdict judge_cluster(const ClusterMeasurements& m) {
  const size_t n = m.hosts.size();
  SL_ENFORCE(m.link_gb_per_s.size() == n && m.latency_us.size() == n,
             "judge_cluster: {} hosts but matrices of {} and {} rows", n, m.link_gb_per_s.size(),
             m.latency_us.size());
  for (size_t r = 0; r < n; ++r)
    SL_ENFORCE(m.link_gb_per_s[r].size() == n && m.latency_us[r].size() == n,
               "judge_cluster: row {} of the pair matrices is not {} long", r, n);
  ClusterVerdict v;

  // Ranks per host name, in rank order; a label for each rank that names it unambiguously.
  std::map<std::string, std::vector<int>> ranks_of;
  std::vector<std::string> order;
  for (size_t r = 0; r < n; ++r) {
    auto& list = ranks_of[m.hosts[r].host];
    if (list.empty()) order.push_back(m.hosts[r].host);
    list.push_back(static_cast<int>(r));
  }
  auto label = [&](size_t r) {
    const std::string& h = m.hosts[r].host;
    return ranks_of[h].size() > 1 ? fmt::format("{} (rank {})", h, r) : h;
  };
  for (const std::string& h : order)
    if (ranks_of[h].size() > 1)
      v.notes.push_back(fmt::format(
          "ranks {} share host {}: links between them are not the network (left out of the "
          "link and latency rules)",
          fmt::join(ranks_of[h], ", "), h));

  // Pairs across hosts are the network; on one host (loopback) the medians use all pairs.
  const bool one_host = order.size() == 1;
  auto network = [&](size_t a, size_t b) { return a != b && m.hosts[a].host != m.hosts[b].host; };
  auto counted = [&](size_t a, size_t b) { return a != b && (one_host || network(a, b)); };
  auto host_median = [&](const std::vector<std::vector<double>>& mat, size_t h, size_t skip,
                         bool only_network) {
    std::vector<double> v;
    for (size_t o = 0; o < n; ++o)
      if (o != skip && (only_network ? network(h, o) : counted(h, o))) v.push_back(mat[h][o]);
    return median(v);
  };
  auto others_median = [&](const std::vector<std::vector<double>>& mat, size_t h) {
    std::vector<double> v;
    for (size_t a = 0; a < n; ++a)
      for (size_t b = a + 1; b < n; ++b)
        if (a != h && b != h && network(a, b)) v.push_back(mat[a][b]);
    return median(v);
  };
  for (size_t h = 0; h < n; ++h) {
    v.host_link_gb_per_s.push_back(host_median(m.link_gb_per_s, h, n, false));
    v.host_latency_us.push_back(host_median(m.latency_us, h, n, false));
  }

  if (n < 2) {
    v.notes.push_back("one host: there is nothing to compare it with");
    return v;
  }
  if (n == 2) {
    v.notes.push_back(fmt::format(
        "2 hosts: the link between {} and {} runs at {} with {} latency, but with no third host "
        "nothing says which end is slow, so no host is blamed",
        label(0), label(1), bandwidth_text(m.link_gb_per_s[0][1]),
        latency_text(m.latency_us[0][1])));
    return v;
  }
  auto name = [&](std::string who, std::string finding) {
    v.named.push_back(std::move(who));
    v.findings.push_back(std::move(finding));
  };

  // Links and latency: host h against the pairs that do not involve it (network pairs only).
  std::vector<bool> link_named(n, false);
  for (size_t h = 0; h < n; ++h) {
    const double bw = host_median(m.link_gb_per_s, h, n, true);
    const double bw_ref = others_median(m.link_gb_per_s, h);
    if (bw_ref > 0 && bw < kSlowLinkFraction * bw_ref) {
      link_named[h] = true;
      name(label(h), fmt::format("host {}: links to the other hosts at {} against a median of {} "
                                 "between the others — its network is slow",
                                 label(h), bandwidth_text(bw), bandwidth_text(bw_ref)));
    }
    const double lat = host_median(m.latency_us, h, n, true);
    const double lat_ref = others_median(m.latency_us, h);
    if (lat_ref > 0 && lat > kSlowLatencyFactor * lat_ref) {
      link_named[h] = true;
      name(label(h), fmt::format("host {}: latency {} against a median of {} between the others "
                                 "— its network is slow",
                                 label(h), latency_text(lat), latency_text(lat_ref)));
    }
  }
  // One link far below both its hosts' other links, where neither host was named.
  for (size_t a = 0; a < n; ++a)
    for (size_t b = a + 1; b < n; ++b) {
      if (!network(a, b) || link_named[a] || link_named[b]) continue;
      const double other_a = host_median(m.link_gb_per_s, a, b, true);
      const double other_b = host_median(m.link_gb_per_s, b, a, true);
      const double bw = m.link_gb_per_s[a][b];
      if (other_a > 0 && other_b > 0 && bw < kSlowLinkFraction * std::min(other_a, other_b))
        name(label(a) + "-" + label(b),
             fmt::format("link {}-{}: {} against at least {} on both hosts' other links — the "
                         "path between them (cable, port or route) is slow",
                         label(a), label(b), bandwidth_text(bw),
                         bandwidth_text(std::min(other_a, other_b))));
    }

  // GEMM and memory: each rank against the median of the others.
  for (size_t h = 0; h < n; ++h) {
    std::vector<double> gemm, mem;
    for (size_t o = 0; o < n; ++o)
      if (o != h) {
        gemm.push_back(m.hosts[o].gemm_gflops);
        mem.push_back(m.hosts[o].memory_gb_per_s);
      }
    const double g_ref = median(gemm);
    const double g = m.hosts[h].gemm_gflops;
    if (g_ref > 0 && g < kSlowComputeFraction * g_ref)
      name(label(h), fmt::format("host {}: GEMM at {:.0f}% of the median ({:.3g} against {:.3g} "
                                 "GFLOP/s) — its CPU is slow or shared",
                                 label(h), 100 * g / g_ref, g, g_ref));
    const double mem_ref = median(mem);
    const double mb = m.hosts[h].memory_gb_per_s;
    if (mem_ref > 0 && mb < kSlowComputeFraction * mem_ref)
      name(label(h),
           fmt::format("host {}: memory bandwidth at {:.0f}% of the median ({} against "
                       "{}) — its memory is slow or shared",
                       label(h), 100 * mb / mem_ref, bandwidth_text(mb), bandwidth_text(mem_ref)));
  }
  return v;
}

nlohmann::ordered_json cluster_json(const ClusterMeasurements& m, const ClusterVerdict& v) {
  using Json = nlohmann::ordered_json;
  Json doc{{"seconds", m.seconds},   {"hosts", Json::array()}, {"pairs", Json::array()},
           {"findings", v.findings}, {"named", v.named},       {"notes", v.notes}};
  for (size_t r = 0; r < m.hosts.size(); ++r) {
    const ClusterHost& h = m.hosts[r];
    doc["hosts"].push_back(
        Json{{"rank", h.rank},
             {"host", h.host},
             {"gemm_gflops", h.gemm_gflops},
             {"memory_gb_per_second", h.memory_gb_per_s},
             {"link_gb_per_second", r < v.host_link_gb_per_s.size() ? v.host_link_gb_per_s[r] : 0},
             {"latency_us", r < v.host_latency_us.size() ? v.host_latency_us[r] : 0}});
    for (size_t o = r + 1; o < m.hosts.size(); ++o)
      doc["pairs"].push_back(Json{{"a", static_cast<int>(r)},
                                  {"b", static_cast<int>(o)},
                                  {"gb_per_second", m.link_gb_per_s[r][o]},
                                  {"latency_us", m.latency_us[r][o]}});
  }
  return doc;
}

}  // namespace shardlab::doctor
