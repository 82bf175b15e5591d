// The two judges of a cluster's links, on hand-made events (the cluster suites run them live):
// HostWatch (net/host_watch.h) names a host whose ranks all went silent while others were still
// heard, never a run on one host, never a slow one, and at a job's end the host whose ranks never
// ended; TransferWatch (net/transfer_watch.h) says a group's transfers are slow when their bus
// bandwidth falls 4x below the first 10 s, and not when a rank computes slowly (its peers then
// wait longer: wait, not transfer).
#include <QtTest>

#include "net/collector.h"
#include "net/host_watch.h"
#include "net/run_model.h"
#include "net/transfer_watch.h"
#include "tests/common/telemetry_events.h"

using namespace shardlab;
using namespace shardlab::net;

namespace {

// A COLLECTIVE of `bytes` on `group` at `time`, `duration` s of which `wait` s waiting.
telemetry::Event collective(int rank, double time, double duration, double wait,
                            const std::string& group = "world", int64_t bytes = 1 << 20) {
  telemetry::CollectiveEvent c;
  c.op = "all_reduce";
  c.group = group;
  c.bytes = bytes;
  c.start = time - duration;
  c.duration = duration;
  c.wait = wait;
  // A ring all-reduce of 4 ranks: busbw = algbw x 2 (n-1)/n.
  c.algbw = static_cast<double>(bytes) / 1e9 / duration;
  c.busbw = c.algbw * 1.5;
  telemetry::Event e;
  e.rank = rank;
  e.time = time;
  e.payload = c;
  return e;
}

// Rank `rank` of a pure data-parallel world of 4 on `host`.
Hello hello(int rank, const std::string& host) {
  Hello h = test::grid_hello("job", rank, 4, 1, 1, 4);
  h.host = host;
  h.pid = 100 + rank;
  return h;
}

}  // namespace

class TestLinkWatches : public QObject {
  Q_OBJECT

 private slots:
  void hostLostWhileOthersAreHeard() {
    HostWatch w;
    for (int r = 0; r < 4; ++r) w.hello(r, r < 2 ? "h1" : "h2", 100);
    for (double t = 100; t <= 130; t += 1) {
      for (int r = 0; r < 4; ++r)
        if (r < 2 || t <= 120) w.heard(r, t, static_cast<int64_t>(t - 99));
      if (t < 130) QVERIFY2(w.check(t).empty(), qPrintable(QString::number(t)));
    }
    const std::vector<LostHost> lost = w.check(130);
    QCOMPARE(lost.size(), size_t{1});
    QCOMPARE(lost[0].host, std::string("h2"));
    QCOMPARE(lost[0].ranks, (std::vector<int>{2, 3}));
    QCOMPARE(lost[0].step, int64_t{21});
    QCOMPARE(lost[0].line(),
             std::string("host h2 (ranks 2, 3) lost at step 21: no answer for 10 s"));
    QCOMPARE(lost_host_of(lost[0].line()), std::string("h2"));
    QVERIFY(lost_host_of("connection closed before the rank finished").empty());
    QVERIFY(w.check(140).empty());  // named once
  }

  void oneHostOrEveryHostSilentNamesNobody() {
    HostWatch one;
    for (int r = 0; r < 4; ++r) one.hello(r, "node", 100);
    QVERIFY(one.check(200).empty());  // a run on one host: the collector may be the one cut off
    HostWatch all;
    for (int r = 0; r < 4; ++r) all.hello(r, r < 2 ? "h1" : "h2", 100);
    QVERIFY(all.check(200).empty());  // nobody heard after anybody: no evidence against a host
  }

  void slowHostIsNotLost() {
    HostWatch w;
    for (int r = 0; r < 4; ++r) w.hello(r, r < 2 ? "h1" : "h2", 100);
    // h2's heartbeats every 4 s (a loaded host): never 10 s of silence.
    for (double t = 100; t <= 160; t += 1) {
      for (int r = 0; r < 2; ++r) w.heard(r, t);
      if (static_cast<int>(t) % 4 == 0)
        for (int r = 2; r < 4; ++r) w.heard(r, t);
      QVERIFY(w.check(t).empty());
    }
  }

  void settleAtTheEnd() {
    HostWatch w;
    for (int r = 0; r < 4; ++r) w.hello(r, r < 2 ? "h1" : "h2", 100);
    for (int r = 0; r < 4; ++r) w.heard(r, 104, 5);
    w.ended(0, 110);
    w.ended(1, 110);
    QVERIFY(w.check(110).empty());  // 6 s of silence: not yet
    const std::vector<LostHost> lost = w.settle(111);
    QCOMPARE(lost.size(), size_t{1});
    QCOMPARE(lost[0].line(), std::string("host h2 (ranks 2, 3) lost at step 5: no answer for 7 s"));
    // A finished job settles nobody.
    HostWatch done;
    for (int r = 0; r < 2; ++r) done.hello(r, r == 0 ? "h1" : "h2", 100);
    done.ended(0, 105);
    done.ended(1, 105);
    QVERIFY(done.settle(106).empty());
  }

  void lostHostInTheRunModel() {
    RunModel m;
    for (int r = 0; r < 4; ++r) m.add(Message(hello(r, r < 2 ? "h1" : "h2")), 100);
    const std::string line = "host h2 (ranks 2, 3) lost at step 21: no answer for 10 s";
    for (int r = 0; r < 4; ++r) {
      ConnectionLost lost;
      lost.hello.rank = r;
      lost.reason =
          r < 2 ? "connection closed before the rank finished (killed or crashed?)" : line;
      lost.time = 131;
      m.add(Message(lost.event()), 131);
    }
    QCOMPARE(m.failure_lines(), std::vector<std::string>{line + "; ranks 0, 1 ended with the job"});
    QCOMPARE(m.failure_reason(0), std::string("ended by the failure of host h2"));
    QCOMPARE(m.failure_reason(3), line);
    QCOMPARE(m.host_of(2), std::string("h2"));
    QVERIFY(m.all_done());
    const std::string table = m.table(132);
    QVERIFY2(table.find(line + "; ranks 0, 1 ended with the job") != std::string::npos,
             table.c_str());
  }

  void slowTransfersAreSaid() {
    TransferWatch w;
    // 10 s of 1 MiB all-reduces at 1 ms each (about 1.6 GB/s bus), then 100 ms each.
    for (double t = 0; t < 10; t += 0.01) w.add(collective(0, 1000 + t, 0.001, 0));
    for (double t = 10; t < 13; t += 0.1) w.add(collective(0, 1000 + t, 0.001, 0));
    QVERIFY(!w.slow());
    for (double t = 13; t < 20; t += 0.1) w.add(collective(0, 1000 + t, 0.1, 0));
    const auto slow = w.slow();
    QVERIFY(slow.has_value());
    QCOMPARE(slow->kind, std::string("world"));
    QVERIFY(std::abs(slow->baseline_gb_per_s / slow->recent_gb_per_s - 100) < 1);
    QVERIFY2(slow->text.starts_with("world transfers at 16 MB/s against 1.6 GB/s in the first 10 "
                                    "s — a link is slow"),
             slow->text.c_str());
  }

  // A link slowed 1 s after the baseline: slow() needs its recent window to span
  // kRecentSeconds / 2 and says nothing yet; slow_lately() sees the last second's transfers.
  void justSlowedLinkIsSeenLately() {
    TransferWatch w;
    for (double t = 0; t < 10; t += 0.01) w.add(collective(0, 1000 + t, 0.001, 0));
    for (double t = 10; t < 11; t += 0.01) w.add(collective(0, 1000 + t, 0.001, 0));
    QVERIFY(!w.slow_lately());
    for (double t = 11; t < 11.5; t += 0.1) w.add(collective(0, 1000 + t, 0.1, 0));
    QVERIFY(!w.slow());
    QVERIFY(w.slow_lately());
    // A peer that computes slowly instead (the same 100 ms, 99 of them waiting for it) is not.
    TransferWatch c;
    for (double t = 0; t < 11; t += 0.01) c.add(collective(0, 1000 + t, 0.001, 0));
    for (double t = 11; t < 11.5; t += 0.1) c.add(collective(0, 1000 + t, 0.1, 0.099));
    QVERIFY(!c.slow_lately());
  }

  void slowComputeIsNotASlowLink() {
    TransferWatch w;
    for (double t = 0; t < 10; t += 0.01) w.add(collective(0, 1000 + t, 0.001, 0, "dp[0]"));
    // A peer computes slowly: each collective now takes 100 ms, 99 of them waiting for it.
    for (double t = 10; t < 20; t += 0.1) w.add(collective(0, 1000 + t, 0.1, 0.099, "dp[0]"));
    QVERIFY2(!w.slow(), w.slow() ? w.slow()->text.c_str() : "");
    QVERIFY(std::abs(w.recent("dp") / w.baseline("dp") - 1) < 0.01);
  }

  void unknownWaitsAreNotCounted() {
    TransferWatch w;
    for (double t = 0; t < 20; t += 0.1) w.add(collective(0, 1000 + t, t < 10 ? 0.001 : 1, -1));
    QVERIFY(!w.slow());
    QCOMPARE(w.baseline("world"), 0.0);
  }
};

QTEST_GUILESS_MAIN(TestLinkWatches)
#include "tst_link_watches.moc"
