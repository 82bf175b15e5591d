// The threads backend: the shared conformance checks for 1..8 ranks, plus what only this backend
// promises exactly: bit-identical reductions, timeouts that name the missing ranks, abort when a
// rank throws, mismatched calls detected on every rank, records, real asynchrony, and teardown
// that neither hangs nor leaks threads. Rank threads never use QVERIFY: they store what they saw
// and the slot checks it after run_threads returns.
#include <QtTest>

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "engine/comm/threads/communicator.h"
#include "engine/comm/threads/world.h"
#include "engine/core/rng.h"
#include "engine/core/timer.h"
#include "tests/comm/conformance.h"
#include "tests/common/caught.h"
#include "tests/common/text.h"

using namespace shardlab;
using shardlab::test::contains;
using shardlab::test::RankOutcomes;
using namespace std::chrono_literals;

namespace {

CommOptions with_timeout(std::chrono::milliseconds t, std::shared_ptr<CommSink> sink = nullptr) {
  CommOptions o;
  o.timeout = t;
  o.sink = std::move(sink);
  return o;
}

// Runs `fn` under run_threads and turns any exception into a test failure message.
QString run_or_message(int n, const CommOptions& o, const std::function<void(Communicator&)>& fn) {
  try {
    run_threads(n, o, fn);
  } catch (const std::exception& e) {
    return QString::fromStdString(e.what());
  }
  return {};
}

}  // namespace

class TestCommThreads : public QObject {
  Q_OBJECT
 private slots:
  void conformance_data() {
    QTest::addColumn<int>("ranks");
    for (int n = 1; n <= 8; ++n) QTest::addRow("%d ranks", n) << n;
  }

  void conformance() {
    QFETCH(int, ranks);
    const QString err = run_or_message(
        ranks, with_timeout(30s), [](Communicator& comm) { conformance::check_everything(comm); });
    if (!err.isEmpty()) QFAIL(qPrintable(err));
  }

  // Big groups, odd sizes and nested splits: a subset of the checks (the full sweep for 64
  // threads on a small machine would take too long).
  void largeGroupsAndNestedSplits_data() {
    QTest::addColumn<int>("ranks");
    QTest::addRow("13 ranks") << 13;
    QTest::addRow("64 ranks") << 64;
  }

  void largeGroupsAndNestedSplits() {
    QFETCH(int, ranks);
    const QString err = run_or_message(ranks, with_timeout(30s), [](Communicator& comm) {
      conformance::check_all_reduce(comm, 4099, ReduceOp::Avg);
      conformance::check_reduce_scatter(comm, 97, ReduceOp::Min);
      conformance::check_all_gather(comm, 65537);
      conformance::check_broadcast(comm, 1000, comm.size() / 2);
      conformance::check_send_recv_ring(comm, 13);
      conformance::check_split(comm);
      // Nested: quarters of halves.
      auto half = comm.split(comm.rank() % 2, comm.rank(), "half");
      auto quarter = half->split(half->rank() % 2, 0, "quarter");
      conformance::check_all_reduce(*quarter, 1000, ReduceOp::Sum);
      conformance::check_split(*quarter);
    });
    if (!err.isEmpty()) QFAIL(qPrintable(err));
  }

  void reductionIsBitIdenticalAcrossRunsAndRanks() {
    constexpr int n = 5;
    constexpr int64_t count = 100003;
    // The reference: a sequential sum in rank order, which the backend promises to reproduce.
    std::vector<std::vector<float>> inputs(n);
    for (int r = 0; r < n; ++r) {
      inputs[r].resize(count);
      Rng(1000 + r).fill_normal(inputs[r], 0.0f, 1.0f);
    }
    std::vector<float> want(count);
    for (int64_t i = 0; i < count; ++i) {
      float acc = inputs[0][i];
      for (int r = 1; r < n; ++r) acc += inputs[r][i];
      want[i] = acc;
    }
    auto run_once = [&](ReduceOp op) {
      std::vector<std::vector<float>> out(n);
      const QString err = run_or_message(n, with_timeout(30s), [&](Communicator& comm) {
        std::vector<float> data = inputs[comm.rank()];
        comm.all_reduce(data, op);
        out[comm.rank()] = std::move(data);
      });
      if (!err.isEmpty()) qWarning("%s", qPrintable(err));
      return out;
    };
    const auto a = run_once(ReduceOp::Sum), b = run_once(ReduceOp::Sum);
    for (int r = 0; r < n; ++r) {
      QCOMPARE(a[r].size(), size_t(count));
      QCOMPARE(b[r].size(), size_t(count));
      QVERIFY2(std::memcmp(a[r].data(), want.data(), count * sizeof(float)) == 0,
               qPrintable(QString("rank %1 differs from the rank-order sum").arg(r)));
      QVERIFY2(std::memcmp(a[r].data(), b[r].data(), count * sizeof(float)) == 0,
               qPrintable(QString("rank %1 differs between runs").arg(r)));
    }
    // Avg is the same sum times 1/n, so it too is exact against the reference.
    const auto avg = run_once(ReduceOp::Avg);
    const float scale = 1.0f / n;
    for (int r = 0; r < n; ++r)
      for (int64_t i = 0; i < count; i += 997) QCOMPARE(avg[r][i], want[i] * scale);
  }

  void timeoutNamesTheMissingRank() {
    constexpr int n = 4;
    RankOutcomes first, later;
    Stopwatch sw;
    const QString err = run_or_message(n, with_timeout(200ms), [&](Communicator& comm) {
      comm.barrier();  // seq 0: everyone
      std::vector<float> v(100, 1.0f);
      if (comm.rank() != 2) first.capture(comm.rank(), [&] { comm.all_reduce(v, ReduceOp::Sum); });
      // Rank 2 stays away until the others gave up (arriving earlier at its next collective would
      // be a mismatch instead).
      if (comm.rank() == 2) std::this_thread::sleep_for(400ms);
      // The group is now unusable: every later call, rank 2's included, fails at once.
      later.capture(comm.rank(), [&] { comm.barrier(); });
    });
    const double secs = sw.seconds();
    QVERIFY2(err.isEmpty(), qPrintable(err));
    QVERIFY2(secs < 2.0, qPrintable(QString("took %1 s").arg(secs)));
    for (int r : {0, 1, 3}) {
      const std::string& m = first.message[r];
      QVERIFY2(first.type[r] == "TimeoutError", m.c_str());
      QVERIFY2(contains(m, "all_reduce on group world (seq 1)"), m.c_str());
      QVERIFY2(contains(m, "timed out after 0.2 s on rank " + std::to_string(r)), m.c_str());
      QVERIFY2(contains(m, ": rank 2 had not arrived"), m.c_str());
    }
    for (int r = 0; r < n; ++r) {
      QVERIFY2(later.type[r] == "CommError", later.message[r].c_str());
      QVERIFY2(contains(later.message[r], "timed out"), later.message[r].c_str());
    }
  }

  void recvTimesOut() {
    RankOutcomes got;
    Stopwatch sw;
    const QString err = run_or_message(2, with_timeout(200ms), [&](Communicator& comm) {
      std::vector<float> v(3);
      if (comm.rank() == 1) got.capture(1, [&] { comm.recv(v, 0, 7); });
    });
    QVERIFY2(err.isEmpty(), qPrintable(err));
    QVERIFY(sw.seconds() < 2.0);
    QCOMPARE(got.type[1], std::string("TimeoutError"));
    QVERIFY2(
        contains(got.message[1], "recv on group world (seq 0) timed out after 0.2 s on rank 1"),
        got.message[1].c_str());
    QVERIFY2(contains(got.message[1], "rank 0 with tag 7"), got.message[1].c_str());
  }

  void failingRankAbortsItsGroupsPromptly() {
    constexpr int n = 4;
    RankOutcomes world_op, sub_op;
    Stopwatch sw;
    bool rethrown = false;
    try {
      run_threads(n, with_timeout(30s), [&](Communicator& comm) {
        auto parity = comm.split(comm.rank() % 2, comm.rank(), "parity");
        if (comm.rank() == 1) throw std::runtime_error("boom");
        std::vector<float> v(1000, 1.0f);
        // Rank 3 waits for rank 1 in the sub-group; 0 and 2 complete theirs and then wait for
        // rank 1 in the world.
        sub_op.capture(comm.rank(), [&] { parity->all_reduce(v, ReduceOp::Sum); });
        world_op.capture(comm.rank(), [&] { comm.all_reduce(v, ReduceOp::Sum); });
      });
    } catch (const CommError& e) {
      QFAIL(qPrintable(QString("rethrew a peer's CommError, not the failure: ") + e.what()));
    } catch (const std::runtime_error& e) {
      QCOMPARE(std::string(e.what()), std::string("boom"));
      rethrown = true;
    }
    const double secs = sw.seconds();
    QVERIFY(rethrown);
    QVERIFY2(secs < 5.0, qPrintable(QString("took %1 s").arg(secs)));
    QVERIFY2(sub_op.type[3] == "CommError", sub_op.message[3].c_str());
    QVERIFY2(contains(sub_op.message[3], "all_reduce on group parity"), sub_op.message[3].c_str());
    for (int r : {0, 2, 3}) {
      // Ranks 0 and 2 may complete their sub-group operation before the abort reaches it.
      const std::string& m = sub_op.type[r].empty() ? world_op.message[r] : sub_op.message[r];
      QVERIFY2(world_op.type[r] == "CommError", world_op.message[r].c_str());
      QVERIFY2(contains(m, "rank 1 of group world failed: boom"), m.c_str());
    }
  }

  void mismatchedCallsFailOnEveryRank_data() {
    QTest::addColumn<QString>("kind");
    QTest::addColumn<QString>("expect");
    QTest::addRow("count") << "count"
                           << "(count differs): ranks 0, 1, 2 called all_reduce(count "
                              "10, sum); rank 3 called all_reduce(count 12, sum)";
    QTest::addRow("op") << "op"
                        << "(operation differs): rank 0 called broadcast(count 10, root 0)";
    QTest::addRow("root") << "root"
                          << "(root differs)";
    QTest::addRow("reduce") << "reduce"
                            << "(reduce op differs)";
    QTest::addRow("split vs barrier") << "split"
                                      << "rank 2 called split()";
  }

  void mismatchedCallsFailOnEveryRank() {
    QFETCH(QString, kind);
    QFETCH(QString, expect);
    constexpr int n = 4;
    RankOutcomes bad, after;
    Stopwatch sw;
    const QString err = run_or_message(n, with_timeout(5s), [&](Communicator& comm) {
      const int r = comm.rank();
      std::vector<float> v(r == 3 && kind == "count" ? 12 : 10, 1.0f);
      bad.capture(r, [&] {
        if (kind == "count") comm.all_reduce(v, ReduceOp::Sum);
        if (kind == "op") r == 0 ? comm.broadcast(v, 0) : comm.all_reduce(v, ReduceOp::Sum);
        if (kind == "root") comm.broadcast(v, r == 1 ? 1 : 0);
        if (kind == "reduce") comm.all_reduce(v, r == 2 ? ReduceOp::Max : ReduceOp::Sum);
        if (kind == "split") r == 2 ? (void)comm.split(0, 0, "s") : comm.barrier();
      });
      // Every rank failed at the same sequence number: the group is still in step.
      after.capture(r, [&] { conformance::check_all_reduce(comm, 1000, ReduceOp::Sum); });
    });
    QVERIFY2(err.isEmpty(), qPrintable(err));
    QVERIFY2(sw.seconds() < 3.0, "a mismatch must not wait for the timeout");
    for (int r = 0; r < n; ++r) {
      QVERIFY2(bad.type[r] == "CommError",
               qPrintable(QString::number(r) + ": " + QString::fromStdString(bad.message[r])));
      QVERIFY2(contains(bad.message[r], expect.toStdString()), bad.message[r].c_str());
      QVERIFY2(contains(bad.message[r], "on rank " + std::to_string(r)), bad.message[r].c_str());
      QVERIFY2(after.type[r].empty(), after.message[r].c_str());
    }
  }

  void mismatchedSendRecvCounts() {
    RankOutcomes got;
    const QString err = run_or_message(2, with_timeout(5s), [&](Communicator& comm) {
      std::vector<float> five(5, 1.0f), six(6);
      if (comm.rank() == 0) comm.send(five, 1, 3);
      if (comm.rank() == 1) got.capture(1, [&] { comm.recv(six, 0, 3); });
    });
    QVERIFY2(err.isEmpty(), qPrintable(err));
    QCOMPARE(got.type[1], std::string("CommError"));
    QVERIFY2(
        contains(got.message[1], "rank 0 sent 5 elements with tag 3, but this receive expects 6"),
        got.message[1].c_str());
  }

  void badArgumentsAreRejectedBeforeAnythingIsSent() {
    auto world = make_thread_world(3, with_timeout(5s));
    Communicator& c = *world[1];
    std::vector<float> whole(10), wrong(2);  // rank 1 owns 3 of 10 elements (4, 3, 3)
    auto message = [](auto&& f) -> std::string {
      try {
        f();
      } catch (const InvalidArgument& e) {
        return e.what();
      } catch (const std::exception& e) {
        return std::string("wrong type: ") + e.what();
      }
      return "no exception";
    };
    std::string m = message([&] { c.reduce_scatter(whole, wrong, ReduceOp::Sum); });
    QVERIFY2(contains(m, "rank 1 owns 3 of the 10 input elements, but the output holds 2"),
             m.c_str());
    m = message([&] { c.all_gather(wrong, whole); });
    QVERIFY2(contains(m, "rank 1 owns 3 of the 10 output elements, but the input holds 2"),
             m.c_str());
    m = message([&] { c.broadcast(whole, 3); });
    QVERIFY2(contains(m, "root 3 is not a rank of a group of 3"), m.c_str());
    m = message([&] { c.send(whole, 1, 0); });
    QVERIFY2(contains(m, "peer 1 is not another rank"), m.c_str());
    m = message([&] { c.recv(whole, -1, 0); });
    QVERIFY2(contains(m, "peer -1 is not another rank"), m.c_str());
    m = message([&] { c.send(whole, 0, -2); });
    QVERIFY2(contains(m, "tag must be >= 0"), m.c_str());
    m = message([&] { c.split(0, 0, ""); });
    QVERIFY2(contains(m, "needs a name"), m.c_str());
    m = message([&] { make_thread_world(0, with_timeout(1s)); });
    QVERIFY2(contains(m, "at least one rank"), m.c_str());
    m = message([&] { run_threads(0, with_timeout(1s), [](Communicator&) {}); });
    QVERIFY2(contains(m, "at least one rank"), m.c_str());
    // Nothing was queued: tearing down is immediate.
    Stopwatch sw;
    world.clear();
    QVERIFY(sw.seconds() < 1.0);
  }

  void recordsOnePerOperationPerRank() {
    constexpr int n = 3;
    auto sink = std::make_shared<MemorySink>();
    const QString err = run_or_message(n, with_timeout(5s, sink), [&](Communicator& comm) {
      const int r = comm.rank();
      std::vector<float> whole(10, 1.0f), chunk(chunk_range(10, n, r).size(), 1.0f), ring(7);
      comm.all_reduce(whole, ReduceOp::Sum);             // seq 0
      comm.reduce_scatter(whole, chunk, ReduceOp::Max);  // seq 1
      comm.all_gather(chunk, whole);                     // seq 2
      comm.broadcast(whole, 1);                          // seq 3
      comm.barrier();                                    // seq 4
      auto s = comm.send_async(ring, (r + 1) % n, 0);    // p2p seq 0
      comm.recv(ring, (r + n - 1) % n, 0);               // p2p seq 1
      s->wait();
      auto sub = comm.split(0, -r, "all");    // seq 5: no record
      comm.all_reduce(whole, ReduceOp::Sum);  // seq 6
      sub->all_reduce(whole, ReduceOp::Sum);  // "all" seq 0
      try {                                   // a failed operation is recorded too
        comm.all_reduce(std::span<float>(whole).first(r == 0 ? 3 : 4), ReduceOp::Sum);
      } catch (const CommError&) {
      }
    });
    QVERIFY2(err.isEmpty(), qPrintable(err));
    const auto records = sink->records();
    QCOMPARE(records.size(), size_t(n * 10));
    struct Want {
      CommOp op;
      std::string group;
      uint64_t seq;
      int64_t bytes;
      bool ok;
    };
    const std::vector<Want> wants = {
        {CommOp::AllReduce, "world", 0, 40, true}, {CommOp::ReduceScatter, "world", 1, 40, true},
        {CommOp::AllGather, "world", 2, 40, true}, {CommOp::Broadcast, "world", 3, 40, true},
        {CommOp::Barrier, "world", 4, 0, true},    {CommOp::Send, "world", 0, 28, true},
        {CommOp::Recv, "world", 1, 28, true},      {CommOp::AllReduce, "world", 6, 40, true},
        {CommOp::AllReduce, "all", 0, 40, true},   {CommOp::AllReduce, "world", 7, -1, false},
    };
    for (int r = 0; r < n; ++r) {
      std::vector<CommRecord> mine;
      for (const auto& rec : records)
        if (rec.rank == r && rec.group == "world") mine.push_back(rec);
      for (const auto& rec : records)
        if (rec.group == "all" && rec.rank == n - 1 - r) mine.push_back(rec);  // key -r reverses
      std::stable_sort(mine.begin(), mine.end(),
                       [](const CommRecord& a, const CommRecord& b) { return a.start < b.start; });
      QCOMPARE(mine.size(), wants.size());
      for (size_t i = 0; i < wants.size(); ++i) {
        const CommRecord& rec = mine[i];
        const Want& w = wants[i];
        const QString where = QString("rank %1 record %2").arg(r).arg(i);
        QVERIFY2(rec.op == w.op, qPrintable(where));
        QVERIFY2(rec.group == w.group, qPrintable(where));
        QVERIFY2(rec.seq == w.seq, qPrintable(where + QString(" seq %1").arg(rec.seq)));
        if (w.bytes >= 0) QVERIFY2(rec.bytes == w.bytes, qPrintable(where));
        QVERIFY2(rec.ok == w.ok, qPrintable(where));
        QVERIFY2(rec.end >= rec.start, qPrintable(where));
        QCOMPARE(rec.group_size, n);
      }
      QCOMPARE(mine[3].peer, 1);  // broadcast: the root
      QCOMPARE(mine[5].peer, (r + 1) % n);
    }
  }

  void asyncOverlapsWithComputeAndCompletesInOrder() {
    constexpr int n = 2;
    std::atomic<bool> done_while_working{false};
    std::atomic<double> peer_wait_s{1e9}, done_call_s{1e9};
    std::atomic<bool> early_done{true}, in_order{true};
    const QString err = run_or_message(n, with_timeout(5s), [&](Communicator& comm) {
      std::vector<float> a(1 << 16, 1.0f), b(1 << 16, 2.0f), c(1 << 16, 3.0f);
      if (comm.rank() == 0) {
        std::this_thread::sleep_for(100ms);  // rank 1 issues first and finds its op pending
        auto w = comm.all_reduce_async(a, ReduceOp::Sum);
        // "Compute": the collective must complete meanwhile, without anyone calling wait().
        const auto until = Clock::now() + 300ms;
        while (Clock::now() < until && !w->done()) std::this_thread::sleep_for(1ms);
        done_while_working = w->done();
        std::this_thread::sleep_for(std::chrono::milliseconds(std::max<int64_t>(
            0,
            std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count())));
        w->wait();
      } else {
        Stopwatch sw;
        auto w = comm.all_reduce_async(a, ReduceOp::Sum);
        Stopwatch d;
        early_done = w->done();  // rank 0 has not issued yet, and done() must not block
        done_call_s = d.seconds();
        w->wait();
        peer_wait_s = sw.seconds();
      }
      // Three in flight, only the last waited for: the earlier ones are complete by then.
      auto w1 = comm.all_reduce_async(a, ReduceOp::Sum);
      auto w2 = comm.broadcast_async(b, 0);
      auto w3 = comm.all_reduce_async(c, ReduceOp::Max);
      w3->wait();
      if (!w1->done() || !w2->done()) in_order = false;
      w1->wait();
      w2->wait();
      if (a[0] != 4.0f || b[0] != 2.0f || c[0] != 3.0f) in_order = false;
    });
    QVERIFY2(err.isEmpty(), qPrintable(err));
    QVERIFY2(!early_done, "done() was true before the peer issued the collective");
    QVERIFY2(done_call_s < 0.01, "done() blocked");
    QVERIFY2(done_while_working, "the async all_reduce did not progress while the rank computed");
    // Rank 1 only waits for rank 0 to issue (~100 ms), not for rank 0's compute (300 ms more).
    QVERIFY2(peer_wait_s < 0.3, qPrintable(QString("rank 1 waited %1 s").arg(peer_wait_s)));
    QVERIFY(in_order);
  }

  void teardownIsPromptAndFailsWhatIsInFlight() {
    // Nothing in flight: immediate, including communicators whose progress thread was started.
    {
      auto world = make_thread_world(4, with_timeout(30s));
      std::vector<std::thread> threads;
      for (auto& c : world) threads.emplace_back([&c] { c->barrier_async()->wait(); });
      for (auto& t : threads) t.join();
      Stopwatch sw;
      world.clear();
      QVERIFY2(sw.seconds() < 1.0, "teardown hung");
    }
    // In flight: destroying the issuing rank ends the operation at once, with a CommError.
    {
      auto world = make_thread_world(3, with_timeout(30s));
      std::vector<float> v(10, 1.0f);
      WorkHandle w = world[0]->all_reduce_async(v, ReduceOp::Sum);
      std::this_thread::sleep_for(20ms);
      QVERIFY(!w->done());
      Stopwatch sw;
      world.clear();
      QVERIFY2(sw.seconds() < 2.0, "teardown with an operation in flight hung");
      QVERIFY(w->done());
      QVERIFY_THROWS_EXCEPTION(CommError, w->wait());
    }
    // A rank that left: peers waiting for it fail at once instead of timing out.
    {
      auto world = make_thread_world(2, with_timeout(30s));
      world[1].reset();
      Stopwatch sw;
      try {
        world[0]->barrier();
        QFAIL("barrier without rank 1 succeeded");
      } catch (const CommError& e) {
        QVERIFY2(contains(e.what(), "rank 1 left group world"), e.what());
      }
      QVERIFY(sw.seconds() < 2.0);
    }
  }

  // Point to point is not queued behind collectives (conformance checks it too): a send issued
  // while a collective waits for its receiver completes at once, and a wait for a receive costs
  // at most one timeout however many receives are pending.
  void pointToPointBypassesQueuedCollectives() {
    RankOutcomes got;
    Stopwatch sw;
    const QString err = run_or_message(2, with_timeout(300ms), [&](Communicator& comm) {
      std::vector<float> x(100, 1.0f), y(10, 2.0f), a(3), b(3), c(3);
      if (comm.rank() == 0) {
        auto h = comm.all_reduce_async(x, ReduceOp::Sum);
        got.capture(0, [&] {
          comm.send(y, 1, 0);
          h->wait();
        });
      } else {
        got.capture(1, [&] {
          comm.recv(y, 0, 0);
          comm.all_reduce(x, ReduceOp::Sum);
        });
        // Three receives that never match: waiting for the last costs one timeout, not three.
        auto r1 = comm.recv_async(a, 0, 5);
        auto r2 = comm.recv_async(b, 0, 5);
        auto r3 = comm.recv_async(c, 0, 5);
        Stopwatch w;
        got.capture(2, [&] { r3->wait(); });
        got.capture(3, [&] {
          if (w.seconds() > 0.6) throw std::runtime_error("a receive's wait took several timeouts");
        });
      }
    });
    QVERIFY2(err.isEmpty(), qPrintable(err));
    for (int k : {0, 1, 3}) QVERIFY2(got.type[k].empty(), got.message[k].c_str());
    QVERIFY2(got.type[2] == "TimeoutError", got.message[2].c_str());
    QVERIFY2(sw.seconds() < 1.5, qPrintable(QString("took %1 s").arg(sw.seconds())));
  }

  // Dropping the handle of a pending collective, plainly or by throwing while it is in flight:
  // once the handle's destructor returns, nothing may touch the buffer. A guard declared before
  // the handle "frees" the buffer after the handle is gone by overwriting it with a sentinel; the
  // buffers outlive the run, so a late write shows (and cannot corrupt the heap) even without
  // ASan. Peers either complete (the collective ran before the drop) or get CommError.
  void droppedHandleLeavesTheBufferAlone_data() {
    QTest::addColumn<bool>("throws");
    QTest::addRow("dropped") << false;
    QTest::addRow("rank throws") << true;
  }

  void droppedHandleLeavesTheBufferAlone() {
    QFETCH(bool, throws);
    static constexpr float kFreed = -12345.0f;
    constexpr int64_t kCount = 4099;
    struct Release {  // the buffer's owner, in the dropping rank's frame
      std::vector<float>& buf;
      ~Release() { std::fill(buf.begin(), buf.end(), kFreed); }
    };
    for (int it = 0; it < 200; ++it) {
      const int n = 2 + it % 3, dropper = it % n;
      const auto delay = std::chrono::microseconds((it * 37) % 400);
      std::vector<std::vector<float>> bufs(n, std::vector<float>(kCount));
      RankOutcomes peers;
      bool rethrown = false;
      Stopwatch sw;
      try {
        run_threads(n, with_timeout(10s), [&](Communicator& comm) {
          const int r = comm.rank();
          auto& buf = bufs[static_cast<size_t>(r)];
          for (int64_t i = 0; i < kCount; ++i) buf[i] = conformance::contribution(r, i);
          if (r == dropper) {
            {
              Release release{buf};
              WorkHandle h = comm.all_reduce_async(buf, ReduceOp::Sum);
              std::this_thread::sleep_for(delay);
              if (throws) throw std::runtime_error("boom");
            }
            std::this_thread::sleep_for(1ms);  // peers arrive after the drop
            return;
          }
          std::this_thread::sleep_for(std::chrono::microseconds((it * 53 + r * 101) % 500));
          peers.capture(r, [&] { comm.all_reduce(buf, ReduceOp::Sum); });
        });
      } catch (const std::runtime_error& e) {
        QCOMPARE(std::string(e.what()), std::string("boom"));
        rethrown = true;
      }
      QCOMPARE(rethrown, throws);
      QVERIFY2(sw.seconds() < 5.0, "a dropped handle left peers waiting");
      const QString where =
          QString("iteration %1 (%2 ranks, rank %3 drops)").arg(it).arg(n).arg(dropper);
      for (int64_t i = 0; i < kCount; ++i)
        if (bufs[dropper][i] != kFreed)
          QFAIL(qPrintable(where + QString(": element %1 of the dropped buffer was written after "
                                           "its handle was destroyed")
                                       .arg(i)));
      for (int r = 0; r < n; ++r) {
        if (r == dropper) continue;
        const std::string& t = peers.type[r];
        QVERIFY2(t.empty() || t == "CommError",
                 qPrintable(where + ": " + QString::fromStdString(t + ": " + peers.message[r])));
        if (t.empty())
          for (int64_t i = 0; i < kCount; i += 97)
            QCOMPARE(bufs[r][i], conformance::reduced(ReduceOp::Sum, n, i));
      }
    }
  }

  // A rank that times out at an operation's entry must withdraw before a late peer can complete
  // the meeting and run the collective on its (abandoned) buffers. Rank 1 arrives around rank 0's
  // deadline. Either both ranks complete, or neither does and rank 0's buffer is untouched.
  void entryTimeoutWithdrawsBeforeALatePeerCompletes() {
    constexpr int64_t kCount = 4096;
    int timed_out = 0, completed = 0;
    for (int it = 0; it < 400; ++it) {
      const auto late = std::chrono::microseconds(1500 + (it * 29) % 1000);
      std::vector<std::vector<float>> bufs(2, std::vector<float>(kCount));
      RankOutcomes got;
      const QString err = run_or_message(2, with_timeout(2ms), [&](Communicator& comm) {
        const int r = comm.rank();
        auto& buf = bufs[static_cast<size_t>(r)];
        for (int64_t i = 0; i < kCount; ++i) buf[i] = conformance::contribution(r, i);
        if (r == 1) std::this_thread::sleep_for(late);
        got.capture(r, [&] { comm.all_reduce(buf, ReduceOp::Sum); });
      });
      QVERIFY2(err.isEmpty(), qPrintable(err));
      const QString where = QString("iteration %1: rank 0 %2 (%3), rank 1 %4 (%5)")
                                .arg(it)
                                .arg(QString::fromStdString(got.type[0]))
                                .arg(QString::fromStdString(got.message[0]))
                                .arg(QString::fromStdString(got.type[1]))
                                .arg(QString::fromStdString(got.message[1]));
      const bool ok0 = got.type[0].empty(), ok1 = got.type[1].empty();
      QVERIFY2(ok0 == ok1, qPrintable(where));
      if (ok0) {
        ++completed;
        for (int r = 0; r < 2; ++r)
          for (int64_t i = 0; i < kCount; i += 61)
            QCOMPARE(bufs[r][i], conformance::reduced(ReduceOp::Sum, 2, i));
      } else {
        ++timed_out;
        // Rank 0 normally arrives first and times out; on a loaded machine its thread can be
        // descheduled until rank 1 has arrived and timed out waiting for it, which fails rank 0's
        // late entry with CommError. Either way the buffer must be untouched.
        QVERIFY2(got.type[0] == "TimeoutError" ||
                     (got.type[0] == "CommError" && got.type[1] == "TimeoutError"),
                 qPrintable(where));
        for (int64_t i = 0; i < kCount; ++i)
          if (bufs[0][i] != conformance::contribution(0, i))
            QFAIL(qPrintable(where + QString(": element %1 of rank 0's buffer was written "
                                             "after it timed out")
                                         .arg(i)));
      }
    }
    qInfo("near-deadline iterations: %d completed, %d timed out", completed, timed_out);
  }
};

QTEST_GUILESS_MAIN(TestCommThreads)
#include "tst_comm_threads.moc"
