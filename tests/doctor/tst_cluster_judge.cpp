// The rule of `shardlab doctor --cluster` (judge_cluster, engine/doctor/cluster_checks.h) on
// hand-made measurements, no MPI: a healthy cluster with the spread real measurements show names
// nobody; one slow host (links, latency, GEMM, memory) is named, and only it; one slow link is
// named as a link; two hosts name nobody and say why; ranks sharing a host are said and left out
// of the link rules. And measure_cluster itself over the threads backend (3 ranks, small sizes).
#include <QtTest>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "engine/comm/threads/world.h"
#include "engine/doctor/cluster_checks.h"
#include "tests/common/text.h"

using shardlab::doctor::bandwidth_text;
using shardlab::doctor::ClusterMeasurements;
using shardlab::doctor::ClusterVerdict;
using shardlab::doctor::judge_cluster;
using shardlab::doctor::latency_text;

namespace {

// Deterministic factors in [1 - spread, 1 + spread] (a 64-bit LCG; the seed picks the sequence).
class Noise {
 public:
  Noise(uint64_t seed, double spread)
      : state_(seed * 2862933555777941757ull + 3037000493ull), spread_(spread) {}
  double operator()() {
    state_ = state_ * 6364136223846793005ull + 1442695040888963407ull;
    const double u = static_cast<double>(state_ >> 11) / static_cast<double>(1ull << 53);
    return 1.0 + spread_ * (2 * u - 1);
  }

 private:
  uint64_t state_;
  double spread_;
};

// n hosts h0..h{n-1}: links of 1.1 GB/s and 45 us, GEMM 50 GFLOP/s, triad 10 GB/s, each figure
// times a factor of `net` (links, latency) or `cpu` (GEMM, memory); 1.0 each by default.
ClusterMeasurements cluster(int n, Noise* net = nullptr, Noise* cpu = nullptr) {
  ClusterMeasurements m;
  const auto un = static_cast<size_t>(n);
  m.link_gb_per_s.assign(un, std::vector<double>(un, 0.0));
  m.latency_us.assign(un, std::vector<double>(un, 0.0));
  for (int r = 0; r < n; ++r)
    m.hosts.push_back({r, QString("h%1").arg(r).toStdString(), 50.0 * (cpu ? (*cpu)() : 1.0),
                       10.0 * (cpu ? (*cpu)() : 1.0)});
  for (size_t a = 0; a < un; ++a)
    for (size_t b = a + 1; b < un; ++b) {
      m.link_gb_per_s[a][b] = m.link_gb_per_s[b][a] = 1.1 * (net ? (*net)() : 1.0);
      m.latency_us[a][b] = m.latency_us[b][a] = 45.0 * (net ? (*net)() : 1.0);
    }
  return m;
}

void set_links_of(ClusterMeasurements& m, size_t h, double gb_per_s) {
  for (size_t o = 0; o < m.hosts.size(); ++o)
    if (o != h) m.link_gb_per_s[h][o] = m.link_gb_per_s[o][h] = gb_per_s;
}

std::string all_text(const ClusterVerdict& v) {
  std::string s;
  for (const auto& f : v.findings) s += "FINDING: " + f + "\n";
  for (const auto& n : v.notes) s += "note: " + n + "\n";
  return s;
}

#define VERIFY_NAMES_NOBODY(v) QVERIFY2((v).findings.empty(), all_text(v).c_str())
#define VERIFY_NAMES_ONLY(v, who)                                                      \
  do {                                                                                 \
    QVERIFY2((v).findings.size() == 1 && (v).named == std::vector<std::string>{(who)}, \
             all_text(v).c_str());                                                     \
  } while (0)

}  // namespace

class TestClusterJudge : public QObject {
  Q_OBJECT

 private slots:
  void units() {
    QCOMPARE(bandwidth_text(0.012), std::string("12 MB/s"));
    QCOMPARE(bandwidth_text(1.1), std::string("1.1 GB/s"));
    QCOMPARE(bandwidth_text(0.00085), std::string("850 kB/s"));
    QCOMPARE(bandwidth_text(0.9998), std::string("1 GB/s"));
    QCOMPARE(latency_text(45), std::string("45 us"));
    QCOMPARE(latency_text(2100), std::string("2.1 ms"));
  }

  // Links and latency +-30% (pair to pair on a shared network), GEMM and memory +-20% (turbo and
  // frequency between like hosts): by the rules' margins nobody can be named, for any draw.
  void healthyNamesNobody() {
    for (int n : {3, 4, 5, 8})
      for (uint64_t seed = 1; seed <= 50; ++seed) {
        Noise net(seed, 0.30), cpu(seed + 1000, 0.20);
        const ClusterVerdict v = judge_cluster(cluster(n, &net, &cpu));
        VERIFY_NAMES_NOBODY(v);
        QVERIFY2(v.notes.empty(), all_text(v).c_str());
        QCOMPARE(v.host_link_gb_per_s.size(), static_cast<size_t>(n));
      }
    // The worst draw inside that spread: one host at the bottom, the others at the top.
    ClusterMeasurements m = cluster(4);
    for (size_t a = 1; a < 4; ++a)
      for (size_t b = a + 1; b < 4; ++b) m.link_gb_per_s[a][b] = m.link_gb_per_s[b][a] = 1.1 * 1.3;
    set_links_of(m, 0, 1.1 * 0.7);
    m.hosts[0].gemm_gflops = 50 * 0.8;
    for (size_t h = 1; h < 4; ++h) m.hosts[h].gemm_gflops = 50 * 1.2;
    VERIFY_NAMES_NOBODY(judge_cluster(m));
  }

  void slowLinkHostNamed_data() {
    QTest::addColumn<int>("n");
    QTest::addColumn<int>("slow");
    QTest::newRow("3 hosts, h1") << 3 << 1;
    QTest::newRow("4 hosts, h1") << 4 << 1;
    QTest::newRow("4 hosts, h3") << 4 << 3;
    QTest::newRow("6 hosts, h0") << 6 << 0;
  }
  void slowLinkHostNamed() {
    QFETCH(int, n);
    QFETCH(int, slow);
    Noise net(7, 0.30);
    ClusterMeasurements m = cluster(n, &net);
    set_links_of(m, static_cast<size_t>(slow), 0.012);
    const ClusterVerdict v = judge_cluster(m);
    const std::string h = QString("h%1").arg(slow).toStdString();
    VERIFY_NAMES_ONLY(v, h);
    VERIFY_CONTAINS(v.findings[0], "host " + h +
                                       ": links to the other hosts at 12 MB/s against "
                                       "a median of ");
    VERIFY_CONTAINS(v.findings[0], "GB/s between the others — its network is slow");
    QCOMPARE(v.host_link_gb_per_s[static_cast<size_t>(slow)], 0.012);
  }

  void slowLatencyHostNamed() {
    ClusterMeasurements m = cluster(4);
    for (size_t o = 0; o < 4; ++o)
      if (o != 2) m.latency_us[2][o] = m.latency_us[o][2] = 2100;
    const ClusterVerdict v = judge_cluster(m);
    VERIFY_NAMES_ONLY(v, "h2");
    QCOMPARE(v.findings[0],
             std::string("host h2: latency 2.1 ms against a median of 45 us between the others "
                         "— its network is slow"));
  }

  void oneSlowLinkNamedAsLink() {
    Noise net(3, 0.30);
    ClusterMeasurements m = cluster(4, &net);
    m.link_gb_per_s[1][2] = m.link_gb_per_s[2][1] = 0.012;
    const ClusterVerdict v = judge_cluster(m);
    VERIFY_NAMES_ONLY(v, "h1-h2");
    VERIFY_CONTAINS(v.findings[0], "link h1-h2: 12 MB/s against at least ");
  }

  void slowGemmHostNamed() {
    Noise cpu(11, 0.10);
    ClusterMeasurements m = cluster(4, nullptr, &cpu);
    for (size_t h = 0; h < 4; ++h) m.hosts[h].gemm_gflops = 50;
    m.hosts[3].gemm_gflops = 20.5;
    const ClusterVerdict v = judge_cluster(m);
    VERIFY_NAMES_ONLY(v, "h3");
    VERIFY_CONTAINS(v.findings[0], "host h3: GEMM at 41% of the median");
    VERIFY_CONTAINS(v.findings[0], "its CPU is slow or shared");
  }

  void slowMemoryHostNamed() {
    ClusterMeasurements m = cluster(3);
    m.hosts[0].memory_gb_per_s = 4.5;
    const ClusterVerdict v = judge_cluster(m);
    VERIFY_NAMES_ONLY(v, "h0");
    VERIFY_CONTAINS(v.findings[0],
                    "host h0: memory bandwidth at 45% of the median (4.5 GB/s "
                    "against 10 GB/s) — its memory is slow or shared");
  }

  // Two hosts: one end is slow in every way, but nothing says which; one note says so.
  void twoHostsNameNobody() {
    ClusterMeasurements m = cluster(2);
    set_links_of(m, 1, 0.012);
    m.hosts[1].gemm_gflops = 5;
    const ClusterVerdict v = judge_cluster(m);
    VERIFY_NAMES_NOBODY(v);
    QCOMPARE(v.notes.size(), size_t{1});
    VERIFY_CONTAINS(v.notes[0], "2 hosts: the link between h0 and h1 runs at 12 MB/s");
    VERIFY_CONTAINS(v.notes[0], "no third host");
    VERIFY_CONTAINS(v.notes[0], "no host is blamed");
  }

  // Loopback: every rank on one host. Said in one note; a slow pair there is not the network.
  void ranksSharingAHost() {
    ClusterMeasurements m = cluster(3);
    for (auto& h : m.hosts) h.host = "vm";
    set_links_of(m, 1, 0.012);
    const ClusterVerdict v = judge_cluster(m);
    VERIFY_NAMES_NOBODY(v);
    QCOMPARE(v.notes.size(), size_t{1});
    VERIFY_CONTAINS(v.notes[0],
                    "ranks 0, 1, 2 share host vm: links between them are not the "
                    "network");
    // GEMM is still judged per rank (each measured alone), named by host and rank.
    m.hosts[2].gemm_gflops = 10;
    const ClusterVerdict g = judge_cluster(m);
    VERIFY_NAMES_ONLY(g, "vm (rank 2)");
  }

  void badShapeRefused() {
    ClusterMeasurements m = cluster(3);
    m.latency_us.pop_back();
    QVERIFY_THROWS_EXCEPTION(shardlab::InvalidArgument, judge_cluster(m));
  }

  void jsonFields() {
    ClusterMeasurements m = cluster(3);
    m.hosts[1].gemm_gflops = 10;
    const auto doc = shardlab::doctor::cluster_json(m, judge_cluster(m));
    QCOMPARE(doc["hosts"].size(), size_t{3});
    QCOMPARE(doc["hosts"][1]["host"].get<std::string>(), std::string("h1"));
    QCOMPARE(doc["hosts"][1]["gemm_gflops"].get<double>(), 10.0);
    QCOMPARE(doc["hosts"][0]["link_gb_per_second"].get<double>(), 1.1);
    QCOMPARE(doc["hosts"][0]["latency_us"].get<double>(), 45.0);
    QCOMPARE(doc["pairs"].size(), size_t{3});
    QCOMPARE(doc["pairs"][2]["a"].get<int>(), 1);
    QCOMPARE(doc["pairs"][2]["b"].get<int>(), 2);
    QCOMPARE(doc["findings"].size(), size_t{1});
    QCOMPARE(doc["named"][0].get<std::string>(), std::string("h1"));
    QVERIFY(doc.contains("seconds"));
  }

  // measure_cluster runs on any Communicator: 3 ranks as threads, small sizes.
  void measureOverThreads() {
    shardlab::doctor::ClusterOptions o;
    o.gemm_n = 64;
    o.triad_n = 1 << 16;
    o.message_bytes = 64 << 10;
    std::mutex mu;
    std::vector<ClusterMeasurements> seen(3);
    shardlab::CommOptions copts;
    copts.timeout = std::chrono::milliseconds(20000);
    shardlab::run_threads(3, copts, [&](shardlab::Communicator& c) {
      ClusterMeasurements m = shardlab::doctor::measure_cluster(c, o);
      const std::lock_guard lock(mu);
      seen[static_cast<size_t>(c.rank())] = std::move(m);
    });
    for (const ClusterMeasurements& m : seen) {
      QCOMPARE(m.hosts.size(), size_t{3});
      QCOMPARE(m.hosts[2].host, seen[0].hosts[0].host);
      QVERIFY(!m.hosts[0].host.empty());
      QCOMPARE(m.link_gb_per_s, seen[0].link_gb_per_s);
      for (size_t a = 0; a < 3; ++a) {
        QCOMPARE(m.hosts[a].rank, static_cast<int>(a));
        QVERIFY(m.hosts[a].gemm_gflops > 0);
        QVERIFY(m.hosts[a].memory_gb_per_s > 0);
        for (size_t b = 0; b < 3; ++b) {
          if (a == b) continue;
          QVERIFY(m.link_gb_per_s[a][b] > 0 && std::isfinite(m.link_gb_per_s[a][b]));
          QVERIFY(m.latency_us[a][b] > 0);
          QCOMPARE(m.link_gb_per_s[a][b], m.link_gb_per_s[b][a]);
        }
      }
    }
  }
};

QTEST_GUILESS_MAIN(TestClusterJudge)
#include "tst_cluster_judge.moc"
