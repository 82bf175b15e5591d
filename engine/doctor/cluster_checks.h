// `shardlab doctor --cluster`: every rank of a world (under mpirun, one rank per host) measures its
// host, and judge_cluster() names the host or link that is out of line, in words.
//
// What is measured (measure_cluster):
//   - the host name (gethostname);
//   - GEMM: OpenBLAS sgemm on one BLAS thread (one rank's compute as ShardLab runs it), n = 512,
//     the best of 5 after a warm-up, in GFLOP/s;
//   - memory: the STREAM triad of `shardlab bench` (engine/bench/triad.h) on one thread over three
//     arrays of 8M floats (96 MB, beyond any last-level cache), the best of 5, in GB/s;
//   - every pair of ranks: bandwidth by ping-pong of 4 MiB messages (2 x 4 MiB over the round
//     trip, the best of 3 after a warm-up) and latency by ping-pong of one float (half the median
//     of 20 round trips after 3 warm-ups), both through the project's Communicator (send/recv),
//     so the figures are what a job's point-to-point traffic sees, backend overhead included.
//
// One at a time. GEMM and memory are measured on one host at a time while every other rank waits
// at a barrier, host after host in compute_rounds rounds, each host keeping its best; pairs are
// measured one pair at a time, the others again at a barrier. Rounds of disjoint pairs (a
// round-robin tournament) would take O(N) rounds instead of the O(N^2) single pairs, but pairs of
// one round share what is being judged: the switch's backplane, an uplink, and on a test machine of
// 2 cores the very cores, so a pair's figure would depend on its neighbours. One pair at a time
// keeps each figure the pair's own; a pair costs a few milliseconds on a healthy network, so even
// 64 hosts (2016 pairs) take seconds.
//
// Bounded. Every wait is a Communicator operation and so bounded by the world's options().timeout
// (TimeoutError naming the operation); no barrier ever waits for more than one host's GEMM and
// triad or one pair's ping-pongs. Nothing here calls exit().
//
// Several ranks on one host. The check means one rank per host; where ranks share a host name
// (loopback tests, or a mistaken host list) everything is still measured, the verdict says so in
// one note ("ranks 0, 1, 2 share host X: links between them are not the network"), and pairs of
// ranks on one host are left out of the link and latency rules (shared memory is not a network).
//
// No MPI here: measure_cluster runs on any Communicator (the CLI makes the MPI world, tests may use
// the threads backend); judge_cluster is a pure function of the measurements.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace shardlab {
class Communicator;
}

namespace shardlab::doctor {

struct ClusterHost {
  int rank = 0;
  std::string host;
  double gemm_gflops = 0;
  double memory_gb_per_s = 0;
};

// Plain data: what measure_cluster returns on every rank, and what tests write by hand.
struct ClusterMeasurements {
  std::vector<ClusterHost> hosts;  // one per rank, index = rank
  // N x N, symmetric, indexed by rank; the diagonal is unused (0).
  std::vector<std::vector<double>> link_gb_per_s;  // ping-pong bandwidth, GB/s (1e9 bytes)
  std::vector<std::vector<double>> latency_us;     // one-way latency, microseconds
  double seconds = 0;                              // time the measurement took
};

struct ClusterOptions {
  int gemm_n = 512;
  int gemm_reps = 5;
  int64_t triad_n = int64_t{8} << 20;  // floats per array
  int triad_reps = 5;
  // GEMM and memory are measured host after host, in this many rounds; each host keeps its best.
  // A round samples every host at another moment, so a burst of a neighbour's load (a shared VM,
  // mpirun still starting its daemons during the first turn) cannot make one host look slow.
  int compute_rounds = 3;
  int64_t message_bytes = int64_t{4} << 20;
  int bandwidth_reps = 3;
  int latency_round_trips = 20;
};

// Collective over `world`: every rank calls it with the same options; every rank returns the whole
// measurement. Runs GEMM on one BLAS thread (the caller's BLAS thread count is restored).
// InvalidArgument for bad options; TimeoutError / CommError when a peer does not answer.
ClusterMeasurements measure_cluster(Communicator& world, const ClusterOptions& options = {});

struct ClusterVerdict {
  // Per rank: the median of its pairs' bandwidth and latency (pairs to other hosts; all its pairs
  // when every rank shares its host). 0 with no pair.
  std::vector<double> host_link_gb_per_s;
  std::vector<double> host_latency_us;
  // Each names a host or a link that is out of line, in words; non-empty: the check fails.
  std::vector<std::string> findings;
  std::vector<std::string> named;  // what each finding names: "h1" or "h1-h2"
  // Said but blaming nobody (two hosts, ranks sharing a host).
  std::vector<std::string> notes;
};

// The rules, for N >= 3 hosts (each threshold's reason is beside it in cluster_checks.cpp):
//   link      host h's link bandwidth (the median of its pairs) below 1/3 of the median over the
//             pairs that do not involve h: "host h1: links to every other host at 12 MB/s against a
//             median of 1.1 GB/s — its network is slow"
//   latency   the same shape, above 3x: "host h1: latency 2.1 ms against a median of 45 us — its
//             network is slow"
//   one link  a pair below 1/3 of both its hosts' other links (and neither host named):
//             "link h1-h2: 12 MB/s against 1.1 GB/s on both hosts' other links — ..."
//   GEMM      below 60% of the other hosts' median: "host h3: GEMM at 41% of the median — its CPU
//             is slow or shared"
//   memory    below 60% likewise: "... its memory is slow or shared"
// With N = 2 nothing is blamed (no majority says which end is slow): one note says so. Pure.
ClusterVerdict judge_cluster(const ClusterMeasurements& m);

// "12 MB/s", "1.1 GB/s", "850 kB/s" (decimal units); "45 us", "2.1 ms".
std::string bandwidth_text(double gb_per_s);
std::string latency_text(double us);

// The document of `doctor --cluster --json` (without "command"): hosts [{rank, host, gemm_gflops,
// memory_gb_per_second, link_gb_per_second, latency_us}], pairs [{a, b, gb_per_second,
// latency_us}], findings, notes, seconds.
nlohmann::ordered_json cluster_json(const ClusterMeasurements& m, const ClusterVerdict& v);

}  // namespace shardlab::doctor
