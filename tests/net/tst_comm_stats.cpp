// CommStats: step attribution per rank, the heat-map window, aggregates by (op, group) and by
// group kind, the last group to communicate, sparse ranks, the wait / transfer / compute split per
// step and a 1,024-rank volume case. Expected figures are worked out here by hand (durations are
// binary fractions, so sums are exact).
#include <QtTest>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <utility>

#include "net/comm_stats.h"

using namespace shardlab;
using namespace shardlab::net;
namespace tl = shardlab::telemetry;

namespace {

constexpr double kT0 = 1.7e9;

tl::Event make_event(int rank, tl::Payload payload) {
  tl::Event e;
  e.rank = rank;
  e.time = kT0;
  e.payload = std::move(payload);
  return e;
}

tl::Event coll(int rank, std::string op, std::string group, double duration, int64_t bytes = 0,
               double busbw = 0, bool ok = true, double start = kT0) {
  tl::CollectiveEvent c;
  c.op = std::move(op);
  c.group = std::move(group);
  c.bytes = bytes;
  c.start = start;
  c.duration = duration;
  c.busbw = busbw;
  c.ok = ok;
  return make_event(rank, c);
}

tl::Event ar(int rank, double duration) {
  return coll(rank, "all_reduce", "dp[0]", duration);
}

// A collective of `duration` seconds, `wait` of them blocked (-1: unknown), `last` arriving last.
tl::Event waited(int rank, double duration, double wait, int last = -1) {
  tl::CollectiveEvent c;
  c.op = "all_reduce";
  c.group = "dp[0]";
  c.start = kT0;
  c.duration = duration;
  c.wait = wait;
  c.last_rank = last;
  return make_event(rank, c);
}

tl::Event phase(int rank, tl::Phase p, double start, double end) {
  tl::PhaseEvent e;
  e.phase = p;
  e.micro_batch = p == tl::Phase::optimizer ? -1 : 0;
  e.start = start;
  e.end = end;
  return make_event(rank, e);
}

tl::Event step(int rank, int64_t n) {
  tl::StepEvent s;
  s.step = n;
  s.step_seconds = 0.1;
  return make_event(rank, s);
}

}  // namespace

class TestCommStats : public QObject {
  Q_OBJECT

 private slots:
  // A peer inventing (op, group) names cannot grow the table without bound: past kMaxKeys new
  // names count in one "(other)" row, every operation still counted; names are kept printable
  // and short.
  void namesAreBounded() {
    CommStats s;
    constexpr int kNames = 10000;
    for (int i = 0; i < kNames; ++i)
      s.add(coll(0, "all_reduce", "dp[" + std::to_string(i) + "]", 0.001));
    s.add(coll(0, "op\x1b[2J", std::string(1000, 'g'), 0.001));
    QVERIFY2(s.by_key().size() <= CommStats::kMaxKeys + 1,
             qPrintable(QString::number(s.by_key().size())));
    int64_t count = 0;
    for (const auto& [key, a] : s.by_key()) {
      count += a.count;
      QVERIFY(key.group.size() <= 70);
      for (const char c : key.op + key.group) QVERIFY(static_cast<unsigned char>(c) >= 0x20);
    }
    QCOMPARE(count, int64_t{kNames + 1});
    QVERIFY(s.by_key().count(CommKey{"(other)", "(other)"}) == 1);
  }

  void empty() {
    CommStats c;
    QCOMPARE(c.ranks(), 0);
    QCOMPARE(c.first_step(), int64_t{0});
    QCOMPARE(c.last_step(), int64_t{0});
    QCOMPARE(c.last_group(), std::string());
    QCOMPARE(c.last_end(), 0.0);
    QVERIFY(c.by_key().empty());
    QVERIFY(c.by_group_kind().empty());
    QCOMPARE(c.step_seconds(0, 1), 0.0);
    // Events it does not take, and negative ranks, leave it empty.
    c.add(make_event(3, tl::HeartbeatEvent{}));
    c.add(make_event(2, tl::EvalEvent{}));
    c.add(ar(-1, 1.0));
    c.add(step(-4, 2));
    QCOMPARE(c.ranks(), 0);
    QVERIFY(c.by_key().empty());
    QCOMPARE(c.last_step(), int64_t{0});
  }

  void stepAttributionAcrossInterleavedRanks() {
    CommStats c;
    c.add(ar(0, 0.5));   // rank 0, step 1
    c.add(ar(1, 0.25));  // rank 1, step 1
    c.add(step(0, 1));
    c.add(ar(0, 1.0));    // rank 0, step 2
    c.add(ar(1, 0.125));  // rank 1 is still in step 1
    c.add(step(1, 1));
    c.add(ar(1, 2.0));  // rank 1, step 2
    c.add(step(0, 2));
    c.add(ar(0, 4.0));  // rank 0, step 3
    c.add(ar(0, 0.5));  // rank 0, step 3

    QCOMPARE(c.ranks(), 2);
    QCOMPARE(c.last_step(), int64_t{3});
    QCOMPARE(c.first_step(), int64_t{1});
    QCOMPARE(c.step_seconds(0, 1), 0.5);
    QCOMPARE(c.step_seconds(0, 2), 1.0);
    QCOMPARE(c.step_seconds(0, 3), 4.5);
    QCOMPARE(c.step_seconds(1, 1), 0.375);
    QCOMPARE(c.step_seconds(1, 2), 2.0);
    QCOMPARE(c.step_seconds(1, 3), 0.0);
    QCOMPARE(c.step_seconds(0, 4), 0.0);   // after the newest step
    QCOMPARE(c.step_seconds(0, 0), 0.0);   // steps are 1-based
    QCOMPARE(c.step_seconds(5, 1), 0.0);   // unknown rank
    QCOMPARE(c.step_seconds(-1, 1), 0.0);  // negative rank

    // A jump in the reported steps moves the current step with it.
    c.add(step(1, 10));
    c.add(ar(1, 0.75));
    QCOMPARE(c.last_step(), int64_t{11});
    QCOMPARE(c.step_seconds(1, 11), 0.75);
    QCOMPARE(c.step_seconds(0, 11), 0.0);
    // A STEP alone makes the rank known without any collective.
    c.add(step(6, 1));
    QCOMPARE(c.ranks(), 7);
    QCOMPARE(c.step_seconds(6, 1), 0.0);
  }

  // Per step: wait and transfer from collectives with a known wait, comm from all of them,
  // compute from phase spans. The expected sums are kept beside the events fed.
  void waitTransferComputeSplit() {
    struct Sums {
      double comm = 0, wait = 0, transfer = 0, compute = 0;
    };
    std::map<std::pair<int, int64_t>, Sums> want;
    CommStats c;
    std::map<int, int64_t> current;  // each rank's current step
    auto coll = [&](int rank, double duration, double wait) {
      c.add(waited(rank, duration, wait, (rank + 1) % 3));
      Sums& s = want[{rank, current[rank] + 1}];
      s.comm += duration;
      if (wait >= 0) {
        s.wait += std::min(wait, duration);
        s.transfer += duration - std::min(wait, duration);
      }
    };
    auto span = [&](int rank, tl::Phase p, double seconds) {
      c.add(phase(rank, p, kT0 + 1, kT0 + 1 + seconds));
      want[{rank, current[rank] + 1}].compute += seconds;
    };
    auto end_step = [&](int rank) { c.add(step(rank, ++current[rank])); };
    QVERIFY(!c.waits_known());
    for (int s = 1; s <= 4; ++s)
      for (int r = 0; r < 3; ++r) {
        const double k = (r + 1) * s;
        span(r, tl::Phase::forward, 0.125 * k);
        span(r, tl::Phase::backward, 0.25 * k);
        coll(r, 0.5 * k, r == 2 ? 0.0 : 0.375 * k);  // rank 2 never waits
        coll(r, 0.25, 0.5);                          // wait clamped to the duration
        coll(r, 0.75, -1);                           // unknown: comm only
        span(r, tl::Phase::optimizer, 0.0625);
        end_step(r);
      }
    QVERIFY(c.waits_known());
    QCOMPARE(c.last_step(), int64_t{4});
    for (const auto& [key, sums] : want) {
      const auto [r, s] = key;
      QCOMPARE(c.step_seconds(r, s, StepMetric::comm), sums.comm);
      QCOMPARE(c.step_seconds(r, s), sums.comm);  // the old overload is comm
      QCOMPARE(c.step_seconds(r, s, StepMetric::wait), sums.wait);
      QCOMPARE(c.step_seconds(r, s, StepMetric::transfer), sums.transfer);
      QCOMPARE(c.step_seconds(r, s, StepMetric::compute), sums.compute);
      // comm = wait + transfer + the unknown 0.75 s.
      QCOMPARE(c.step_seconds(r, s, StepMetric::comm) - c.step_seconds(r, s, StepMetric::wait) -
                   c.step_seconds(r, s, StepMetric::transfer),
               0.75);
    }
    // By hand, rank 1 step 3 (k = 6): wait 2.25 + 0.25, transfer 0.75 + 0 + (unknown: none),
    // compute 0.75 + 1.5 + 0.0625.
    QCOMPARE(c.step_seconds(1, 3, StepMetric::wait), 2.5);
    QCOMPARE(c.step_seconds(1, 3, StepMetric::transfer), 0.75);
    QCOMPARE(c.step_seconds(1, 3, StepMetric::compute), 2.3125);
    QCOMPARE(c.step_seconds(2, 4, StepMetric::wait), 0.25);

    // Garbage from the wire counts as nothing: negative spans, NaN and infinite waits.
    c.add(phase(0, tl::Phase::forward, kT0 + 2, kT0 + 1));
    c.add(waited(0, 0.5, std::numeric_limits<double>::quiet_NaN()));
    c.add(waited(0, 0.5, std::numeric_limits<double>::infinity()));
    c.add(waited(0, -1.0, 0.25));
    QCOMPARE(c.step_seconds(0, 5, StepMetric::compute), 0.0);
    QCOMPARE(c.step_seconds(0, 5, StepMetric::comm), 1.0);
    QCOMPARE(c.step_seconds(0, 5, StepMetric::wait), 0.0);
    QCOMPARE(c.step_seconds(0, 5, StepMetric::transfer), 0.5);
    QCOMPARE(c.step_seconds(0, 5, static_cast<StepMetric>(9)), 0.0);

    // A rank that only computes still makes the window (a one-rank run has no collectives).
    CommStats solo;
    solo.add(phase(0, tl::Phase::forward, kT0, kT0 + 0.5));
    solo.add(step(0, 1));
    solo.add(phase(0, tl::Phase::backward, kT0, kT0 + 0.25));
    QCOMPARE(solo.ranks(), 1);
    QCOMPARE(solo.last_step(), int64_t{2});
    QCOMPARE(solo.first_step(), int64_t{1});
    QCOMPARE(solo.step_seconds(0, 1, StepMetric::compute), 0.5);
    QCOMPARE(solo.step_seconds(0, 2, StepMetric::compute), 0.25);
    QCOMPARE(solo.step_seconds(0, 2, StepMetric::comm), 0.0);
    QVERIFY(!solo.waits_known());
    QCOMPARE(std::string(to_string(StepMetric::wait)), std::string("wait"));
  }

  void ringWindowEviction() {
    // One rank, 600 steps; step s spends (s % 7 + 1) / 4 s communicating, in two collectives.
    auto seconds_of = [](int64_t s) { return static_cast<double>(s % 7 + 1) / 4.0; };
    CommStats c;
    for (int64_t s = 1; s <= 600; ++s) {
      c.add(ar(0, seconds_of(s) / 2));
      c.add(ar(0, seconds_of(s) / 2));
      if (s == 5) c.add(ar(1, 3.0));  // rank 1 communicated only in its step 1
      c.add(step(0, s));
    }
    QCOMPARE(c.last_step(), int64_t{600});
    QCOMPARE(c.first_step(), int64_t{600 - 512 + 1});  // 89
    QCOMPARE(c.step_seconds(0, 88), 0.0);              // left the window
    QCOMPARE(c.step_seconds(0, 1), 0.0);
    for (int64_t s : {89, 90, 300, 512, 513, 599, 600})
      QCOMPARE(c.step_seconds(0, s), seconds_of(s));
    QCOMPARE(c.step_seconds(1, 1), 0.0);  // outside the window, though its slot is untouched

    // A rank that reports an old step again: the slot holds a newer step, nothing is recorded.
    c.add(step(0, 87));  // current step 88, slot 88 holds step 600
    c.add(ar(0, 100.0));
    QCOMPARE(c.step_seconds(0, 600), seconds_of(600));
    QCOMPARE(c.step_seconds(0, 88), 0.0);
    QCOMPARE(c.last_step(), int64_t{600});

    // Writing a newer step into a used slot resets it: step 513 shares step 1's slot.
    CommStats d;
    d.add(ar(0, 0.5));  // step 1
    d.add(step(0, 512));
    d.add(ar(0, 0.25));  // step 513
    QCOMPARE(d.last_step(), int64_t{513});
    QCOMPARE(d.first_step(), int64_t{2});
    QCOMPARE(d.step_seconds(0, 513), 0.25);
    QCOMPARE(d.step_seconds(0, 1), 0.0);
  }

  void aggregates() {
    CommStats c;
    // op, group, duration, bytes, busbw, ok, start
    c.add(coll(0, "all_reduce", "dp[0]", 0.5, 1000, 10, true, kT0));
    c.add(coll(1, "all_reduce", "dp[1]", 1.5, 2000, 20, true, kT0 + 1));
    c.add(coll(0, "all_reduce", "dp[0]", 1.0, 1000, 4, false, kT0 + 2));
    c.add(coll(2, "send", "pp[0]", 0.25, 300, 8, true, kT0 + 10));
    c.add(coll(3, "all_gather", "world", 2.0, 400, 1, false, kT0 + 9));  // ends last: kT0 + 11
    c.add(coll(2, "all_reduce", "tp[0]", 0.0, 50, 99, true, kT0 + 10.5));
    c.add(coll(2, "all_reduce", "tp[0]", -1.0, 50, 99, true, kT0 + 10.75));  // clock trouble

    QCOMPARE(c.ranks(), 4);
    const auto& k = c.by_key();
    QCOMPARE(k.size(), size_t{5});
    const CommAggregate& dp0 = k.at(CommKey{"all_reduce", "dp[0]"});
    QCOMPARE(dp0.count, int64_t{2});
    QCOMPARE(dp0.failed, int64_t{1});
    QCOMPARE(dp0.bytes, int64_t{2000});
    QCOMPARE(dp0.seconds, 1.5);
    QCOMPARE(dp0.max_seconds, 1.0);
    QCOMPARE(dp0.busbw_seconds, 10 * 0.5 + 4 * 1.0);
    QCOMPARE(dp0.mean_busbw(), 9.0 / 1.5);
    QCOMPARE(dp0.mean_seconds(), 0.75);
    const CommAggregate& dp1 = k.at(CommKey{"all_reduce", "dp[1]"});
    QCOMPARE(dp1.count, int64_t{1});
    QCOMPARE(dp1.failed, int64_t{0});
    QCOMPARE(dp1.mean_busbw(), 20.0);
    const CommAggregate& tp0 = k.at(CommKey{"all_reduce", "tp[0]"});
    QCOMPARE(tp0.count, int64_t{2});
    QCOMPARE(tp0.bytes, int64_t{100});
    QCOMPARE(tp0.seconds, 0.0);       // the negative duration counts as none
    QCOMPARE(tp0.mean_busbw(), 0.0);  // no time spent
    QCOMPARE(tp0.mean_seconds(), 0.0);
    QCOMPARE(k.at(CommKey{"send", "pp[0]"}).count, int64_t{1});
    QCOMPARE(k.at(CommKey{"all_gather", "world"}).failed, int64_t{1});

    const auto g = c.by_group_kind();
    QCOMPARE(g.size(), size_t{4});
    QVERIFY(g.count("dp") && g.count("tp") && g.count("pp") && g.count("world"));
    const CommAggregate& dp = g.at("dp");
    QCOMPARE(dp.count, int64_t{3});
    QCOMPARE(dp.failed, int64_t{1});
    QCOMPARE(dp.bytes, int64_t{4000});
    QCOMPARE(dp.seconds, 3.0);
    QCOMPARE(dp.max_seconds, 1.5);
    QCOMPARE(dp.busbw_seconds, 5.0 + 30.0 + 4.0);
    QCOMPARE(dp.mean_busbw(), 39.0 / 3.0);  // time-weighted, not (10 + 20 + 4) / 3
    QCOMPARE(g.at("pp").mean_busbw(), 8.0);
    QCOMPARE(g.at("pp").bytes, int64_t{300});
    QCOMPARE(g.at("world").count, int64_t{1});
    QCOMPARE(g.at("world").failed, int64_t{1});
    QCOMPARE(g.at("world").mean_busbw(), 1.0);
    QCOMPARE(g.at("tp").count, int64_t{2});

    QCOMPARE(c.last_group(), std::string("world"));
    QCOMPARE(c.last_end(), kT0 + 11);
    // A later end from any rank takes over.
    c.add(coll(1, "all_reduce", "dp[1]", 0.5, 1, 1, true, kT0 + 11));
    QCOMPARE(c.last_group(), std::string("dp[1]"));
    QCOMPARE(c.last_end(), kT0 + 11.5);
    // An earlier one (arriving late) does not.
    c.add(coll(3, "send", "pp[1]", 0.5, 1, 1, true, kT0 + 3));
    QCOMPARE(c.last_group(), std::string("dp[1]"));
  }

  void sparseHighRanks() {
    CommStats c;
    c.add(ar(1023, 0.5));
    QCOMPARE(c.ranks(), 1024);
    QCOMPARE(c.step_seconds(1023, 1), 0.5);
    QCOMPARE(c.step_seconds(500, 1), 0.0);
    c.add(ar(CommStats::kMaxRanks, 1.0));  // beyond any real run: ignored
    QCOMPARE(c.ranks(), 1024);
    QCOMPARE(c.by_key().at(CommKey{"all_reduce", "dp[0]"}).count, int64_t{1});
  }

  // 1,024 ranks x 100 steps x (16 collectives + a STEP), ranks interleaved step by step.
  void volume1024Ranks() {
    constexpr int kRanks = 1024, kSteps = 100, kColl = 16;
    // Collective k of rank r in step s lasts ((r + s + k) % 4 + 1) / 4096 s, on dp[r / 128]
    // (k < 8, all_reduce, busbw 2) or tp[r % 8] (k >= 8, all_gather, busbw 6); 1 KiB each.
    auto dur = [](int r, int s, int k) { return ((r + s + k) % 4 + 1) / 4096.0; };
    CommStats c;
    for (int s = 1; s <= kSteps; ++s)
      for (int r = 0; r < kRanks; ++r) {
        for (int k = 0; k < kColl; ++k) {
          const bool dp = k < 8;
          c.add(
              coll(r, dp ? "all_reduce" : "all_gather",
                   dp ? "dp[" + std::to_string(r / 128) + "]" : "tp[" + std::to_string(r % 8) + "]",
                   dur(r, s, k), 1024, dp ? 2.0 : 6.0, true, kT0 + s + k * 0.01));
        }
        c.add(step(r, s));
      }
    QCOMPARE(c.ranks(), kRanks);
    QCOMPARE(c.last_step(), int64_t{kSteps});
    QCOMPARE(c.first_step(), int64_t{1});
    // Over 16 consecutive k, (r + s + k) % 4 takes each value 4 times: 4 * (1+2+3+4) / 4096.
    const double per_step = 40.0 / 4096.0;
    for (int r : {0, 1, 511, 1023})
      for (int s : {1, 50, 100}) QCOMPARE(c.step_seconds(r, s), per_step);
    QCOMPARE(c.by_key().size(), size_t{8 + 8});
    // dp[g]: 128 ranks x 100 steps x 8 collectives; k < 8 covers each residue twice: 20 / 4096.
    const CommAggregate& dp3 = c.by_key().at(CommKey{"all_reduce", "dp[3]"});
    QCOMPARE(dp3.count, int64_t{128 * kSteps * 8});
    QCOMPARE(dp3.bytes, int64_t{128} * kSteps * 8 * 1024);
    QCOMPARE(dp3.failed, int64_t{0});
    QVERIFY(std::abs(dp3.seconds - 128.0 * kSteps * 20.0 / 4096.0) < 1e-9);
    QCOMPARE(dp3.max_seconds, 4.0 / 4096.0);
    const auto g = c.by_group_kind();
    QCOMPARE(g.size(), size_t{2});
    QCOMPARE(g.at("dp").count, int64_t{kRanks} * kSteps * 8);
    QCOMPARE(g.at("tp").count, int64_t{kRanks} * kSteps * 8);
    QVERIFY(std::abs(g.at("dp").mean_busbw() - 2.0) < 1e-9);
    QVERIFY(std::abs(g.at("tp").mean_busbw() - 6.0) < 1e-9);
    // The latest end: step 100, k = 15 (start kT0 + 100.15), the longest of rank r with
    // (r + 100 + 15) % 4 == 3, i.e. r % 4 == 0; the first such rank (0) sets it, ties keep it.
    QCOMPARE(c.last_group(), std::string("tp[0]"));
    QCOMPARE(c.last_end(), kT0 + 100 + 15 * 0.01 + 4.0 / 4096.0);
  }
};

QTEST_GUILESS_MAIN(TestCommStats)
#include "tst_comm_stats.moc"
