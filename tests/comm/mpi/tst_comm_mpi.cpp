// The mpi backend, with real processes: ctest runs `mpirun -np N tst_comm_mpi N` for N = 2, 3, 4.
// Every process is one rank and runs every test function, so the functions issue their
// collectives in the same order on every rank. Each function works on communicators of its own,
// so a failure in one (a timed-out, now unusable communicator) does not spill into the next.
#include <sys/mman.h>
#include <unistd.h>
#include <QtTest>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>
#include <thread>

#include "engine/comm/mpi/mpi_util.h"
#include "engine/comm/mpi/world.h"
#include "tests/comm/conformance.h"
#include "tests/common/caught.h"
#include "tests/common/text.h"

using namespace shardlab;
using shardlab::test::contains;
using shardlab::test::error_of;
using namespace std::chrono_literals;

namespace {

int g_expected_size = 0;
const MpiSession* g_session = nullptr;

// Generous, so that a slow oversubscribed machine never trips it; only a real hang does.
CommOptions test_options() {
  CommOptions o;
  o.timeout = 30s;
  return o;
}

#define RUN_CONFORMANCE(expr)                                      \
  do {                                                             \
    try {                                                          \
      expr;                                                        \
    } catch (const conformance::ConformanceFailure& e) {           \
      QFAIL(e.what());                                             \
    } catch (const std::exception& e) {                            \
      QFAIL(qPrintable(QStringLiteral("exception: ") + e.what())); \
    }                                                              \
  } while (0)

}  // namespace

class TstCommMpi : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  // The suite really runs as N processes: N ranks with N distinct process ids.
  void worldIsSeveralProcesses() {
    auto world = make_mpi_world(test_options());
    QCOMPARE(world->size(), g_expected_size);
    QCOMPARE(g_session->world_size(), g_expected_size);
    QCOMPARE(world->rank(), g_session->world_rank());
    QCOMPARE(world->name(), std::string("world"));
    QCOMPARE(std::string(world->backend()), std::string("mpi"));
    const auto pid = static_cast<float>(getpid());
    QVERIFY(getpid() < (1 << 24));  // exact as a float
    std::vector<float> pids(static_cast<size_t>(world->size()), -1.0f);
    world->all_gather(std::span<const float>(&pid, 1), pids);
    QCOMPARE(pids[static_cast<size_t>(world->rank())], pid);
    QCOMPARE(std::set<float>(pids.begin(), pids.end()).size(), pids.size());
  }

  void conformance() {
    auto world = make_mpi_world(test_options());
    RUN_CONFORMANCE(conformance::check_everything(*world));
  }

  // Ranks that disagree get CommError on every rank, naming what differs; nothing was sent, so
  // the communicator stays usable.
  void checkCallsMismatch() {
    auto comm = make_mpi_world(test_options());
    const int r = comm->rank();
    {
      std::vector<float> v(r == 0 ? 10 : 11, 1.0f);
      const std::string msg = error_of<CommError>([&] { comm->all_reduce(v, ReduceOp::Sum); });
      QVERIFY2(contains(msg, "element count differs (10 on some ranks, 11 on others)"),
               msg.c_str());
      QVERIFY2(contains(msg, "all_reduce on group world (seq 0)"), msg.c_str());
    }
    {
      std::vector<float> v(4, 1.0f);
      const std::string msg = error_of<CommError>([&] {
        if (r == 0)
          comm->broadcast(v, 0);
        else
          comm->all_reduce(v, ReduceOp::Sum);
      });
      QVERIFY2(contains(msg, "operation differs (all_reduce on some ranks, broadcast on others)"),
               msg.c_str());
    }
    {
      std::vector<float> v(4, 1.0f);
      const std::string msg = error_of<CommError>([&] { comm->broadcast(v, r == 0 ? 0 : 1); });
      QVERIFY2(contains(msg, "root differs (0 on some ranks, 1 on others)"), msg.c_str());
    }
    {
      std::vector<float> v(4, 1.0f);
      const std::string msg =
          error_of<CommError>([&] { comm->all_reduce(v, r == 0 ? ReduceOp::Sum : ReduceOp::Max); });
      QVERIFY2(contains(msg, "reduce op differs (sum on some ranks, max on others)"), msg.c_str());
    }
    {
      // A split against a collective.
      std::vector<float> v(4, 1.0f);
      const std::string msg = error_of<CommError>([&] {
        if (r == 0)
          comm->split(0, 0, "x");
        else
          comm->barrier();
      });
      QVERIFY2(contains(msg, "operation differs"), msg.c_str());
      QVERIFY2(contains(msg, "split"), msg.c_str());
    }
    // Still usable, and right.
    std::vector<float> v(5, static_cast<float>(r + 1));
    comm->all_reduce(v, ReduceOp::Sum);
    const int n = comm->size();
    QCOMPARE(v[4], static_cast<float>(n * (n + 1) / 2));
  }

  // Counts must agree in send/recv: a shorter and a longer message both fail on the receiver.
  void recvCountMismatch() {
    auto comm = make_mpi_world(test_options());
    const int r = comm->rank();
    if (r == 0) {
      std::vector<float> shorter(5, 1.0f), longer(9, 2.0f);
      comm->send(shorter, 1, 3);
      comm->send(longer, 1, 4);
    } else if (r == 1) {
      std::vector<float> in(7);
      std::string msg = error_of<CommError>([&] { comm->recv(in, 0, 3); });
      QVERIFY2(contains(msg, "expects 7 floats but rank 0 sent 5"), msg.c_str());
      QVERIFY2(contains(msg, "recv on group world"), msg.c_str());
      msg = error_of<CommError>([&] { comm->recv(in, 0, 4); });
      QVERIFY2(contains(msg, "rank 0 sent more than the 7 floats this rank expects"), msg.c_str());
    }
  }

  // Bad arguments throw InvalidArgument before anything is sent (same calls on every rank, so
  // sequence numbers stay aligned); the communicator is fine afterwards.
  void badArguments() {
    auto comm = make_mpi_world(test_options());
    const int n = comm->size(), r = comm->rank();
    std::vector<float> ten(10), wrong(static_cast<size_t>(chunk_range(10, n, r).size()) + 1);
    QVERIFY(contains(
        error_of<InvalidArgument>([&] { comm->reduce_scatter(ten, wrong, ReduceOp::Sum); }),
        "reduce_scatter on group world"));
    QVERIFY(contains(error_of<InvalidArgument>([&] { comm->all_gather(wrong, ten); }),
                     "all_gather on group world"));
    QVERIFY(contains(error_of<InvalidArgument>([&] { comm->broadcast(ten, n); }), "is not a rank"));
    QVERIFY(
        contains(error_of<InvalidArgument>([&] { comm->broadcast(ten, -1); }), "is not a rank"));
    QVERIFY(
        contains(error_of<InvalidArgument>([&] { comm->send(ten, r, 0); }), "is not another rank"));
    QVERIFY(
        contains(error_of<InvalidArgument>([&] { comm->recv(ten, n, 0); }), "is not another rank"));
    QVERIFY(contains(error_of<InvalidArgument>([&] { comm->send(ten, (r + 1) % n, -1); }),
                     "tag must be >= 0"));
    QVERIFY(contains(error_of<InvalidArgument>([&] { comm->split(0, 0, ""); }), "needs a name"));
    // More elements than MPI's int counts: reserved address space only, never touched.
    const size_t huge = (size_t{1} << 31) + 16;
    void* p = mmap(nullptr, huge * sizeof(float), PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    QVERIFY(p != MAP_FAILED);
    const std::string msg = error_of<InvalidArgument>(
        [&] { comm->all_reduce(std::span<float>(static_cast<float*>(p), huge), ReduceOp::Sum); });
    munmap(p, huge * sizeof(float));
    QVERIFY2(contains(msg, "more than MPI's int counts"), msg.c_str());
    std::vector<float> v(3, 1.0f);
    comm->all_reduce(v, ReduceOp::Sum);
    QCOMPARE(v[0], static_cast<float>(n));
  }

  // Every operation reaches the sink, once, with the same collective sequence numbers on every
  // rank (checked by gathering them).
  void recordsHaveEqualSeq() {
    auto sink = std::make_shared<MemorySink>();
    CommOptions o = test_options();
    o.sink = sink;
    auto comm = make_mpi_world(o);
    const int n = comm->size(), r = comm->rank();
    std::vector<float> a(100, 1.0f), chunk(static_cast<size_t>(chunk_range(100, n, r).size()));
    comm->all_reduce(a, ReduceOp::Sum);             // seq 0
    comm->broadcast(a, n - 1);                      // seq 1
    comm->barrier();                                // seq 2
    auto half = comm->split(r % 2, r, "half");      // seq 3 (no record)
    comm->reduce_scatter(a, chunk, ReduceOp::Avg);  // seq 4
    comm->all_gather(chunk, a);                     // seq 5
    half->all_reduce(a, ReduceOp::Max);             // half, seq 0
    std::vector<float> out(7, 1.0f), in(7);
    auto s = comm->send_async(out, (r + 1) % n, 9);
    comm->recv(in, (r + n - 1) % n, 9);
    s->wait();

    const auto records = sink->records();
    QCOMPARE(records.size(), size_t{8});
    std::vector<float> seqs;
    for (const CommRecord& rec : records) {
      QVERIFY(rec.ok);
      QVERIFY(rec.end >= rec.start);
      if (rec.op == CommOp::Send || rec.op == CommOp::Recv) {
        QCOMPARE(rec.peer, rec.op == CommOp::Send ? (r + 1) % n : (r + n - 1) % n);
        QCOMPARE(rec.tag, 9);
        QCOMPARE(rec.bytes, int64_t{28});
        continue;
      }
      QCOMPARE(rec.rank, rec.group == "world" ? r : half->rank());
      QCOMPARE(rec.group_size, rec.group == "world" ? n : half->size());
      if (rec.group == "world") seqs.push_back(static_cast<float>(rec.seq));
    }
    const std::vector<float> want = {0, 1, 2, 4, 5};
    QCOMPARE(seqs, want);
    QCOMPARE(records[0].bytes, int64_t{400});
    QCOMPARE(records[1].peer, n - 1);
    // The same on every rank: gather them all.
    std::vector<float> all(seqs.size() * static_cast<size_t>(n));
    comm->all_gather(seqs, all);
    for (int q = 0; q < n; ++q)
      for (size_t i = 0; i < seqs.size(); ++i)
        QCOMPARE(all[static_cast<size_t>(q) * seqs.size() + i], want[i]);
  }

  // Rank 1 joins two collectives 1.5 s late on a communicator with a 300 ms timeout. The others
  // get TimeoutError naming the first operation, its group and sequence number, and CommError for
  // the one queued behind it. Both still complete once rank 1 arrives (rank 1 gets the right
  // answers) but on private copies: nothing writes the others' buffers after their errors. And
  // everything ends cleanly.
  void timeoutNamesTheOperation() {
    auto world = make_mpi_world(test_options());
    auto sink = std::make_shared<MemorySink>();
    CommOptions fast;
    fast.timeout = 300ms;
    fast.sink = sink;
    world->barrier();
    auto base = make_mpi_world(fast);
    auto group = base->split(0, base->rank(), "late-group");
    QVERIFY(group);
    const int r = group->rank(), n = group->size();
    const auto sum = static_cast<float>(n * (n + 1) / 2);
    group->barrier();  // seq 0
    std::vector<float> v(1000, static_cast<float>(r + 1)), w(10, 1.0f);
    if (r == 1) {
      std::this_thread::sleep_for(1500ms);
      group->all_reduce(v, ReduceOp::Sum);  // seq 1: the others are still in it
      group->all_reduce(w, ReduceOp::Sum);  // seq 2
      QCOMPARE(v[999], sum);
      QCOMPARE(w[9], static_cast<float>(n));
    } else {
      auto first = group->all_reduce_async(v, ReduceOp::Sum);
      auto second = group->all_reduce_async(w, ReduceOp::Sum);
      const auto t0 = std::chrono::steady_clock::now();
      const std::string msg = error_of<TimeoutError>([&] { first->wait(); });
      const auto waited = std::chrono::steady_clock::now() - t0;
      QVERIFY2(contains(msg, "all_reduce on group late-group (seq 1) timed out after 300 ms"),
               msg.c_str());
      QVERIFY2(contains(msg, "on rank " + std::to_string(r) + " of " + std::to_string(n)),
               msg.c_str());
      // The others time out together and answer each other's liveness probe; rank 1 sleeps.
      QVERIFY2(contains(msg, "world rank 1 did not answer a liveness probe within 0.3 s"),
               msg.c_str());
      QVERIFY(waited >= 290ms && waited < 1200ms);
      QVERIFY(first->done());
      QCOMPARE(error_of<TimeoutError>([&] { first->wait(); }), msg);  // the same error again
      const std::string queued = error_of<CommError>([&] { second->wait(); });
      QVERIFY2(contains(queued,
                        "all_reduce on group late-group (seq 2): not performed on this "
                        "rank's buffers"),
               queued.c_str());
      // Both records say failed; the communicator refuses further work.
      const auto records = sink->records();
      QVERIFY(records.size() >= 2);
      for (size_t i = records.size() - 2; i < records.size(); ++i) {
        QCOMPARE(records[i].seq, uint64_t{i == records.size() - 2 ? 1u : 2u});
        QVERIFY(!records[i].ok);
      }
      const std::string again = error_of<CommError>([&] { group->barrier(); });
      QVERIFY2(contains(again, "unusable"), again.c_str());
    }
    world->barrier();  // rank 1 has joined: the late all-reduces complete everywhere
    group.reset();     // drains within its 300 ms
    base.reset();
    QCOMPARE(mpi_detail::unfinished_operations(), 0);  // so MPI_Finalize will run
    if (r != 1) {
      QCOMPARE(v[999], static_cast<float>(r + 1));
      QCOMPARE(w[9], 1.0f);
    }
  }

  // Async collectives run in the background even if nobody waits for them yet: even ranks start
  // one on A and block on B, odd ranks the other way round. Were queued operations only run by
  // their waiters, each side would wait for the other's queued one until the timeout.
  void asyncOpsProgressInBackground() {
    CommOptions o = test_options();
    o.timeout = 10s;
    auto a = make_mpi_world(o);
    auto b = make_mpi_world(o);
    const int r = a->rank(), n = a->size();
    std::vector<float> x(50000, static_cast<float>(r + 1)), y(777, 1.0f);
    Communicator& first = r % 2 == 0 ? *a : *b;
    Communicator& second = r % 2 == 0 ? *b : *a;
    std::vector<float>& first_data = r % 2 == 0 ? x : y;
    std::vector<float>& second_data = r % 2 == 0 ? y : x;
    auto pending = first.all_reduce_async(first_data, ReduceOp::Sum);
    second.all_reduce(second_data, ReduceOp::Sum);
    // The peers of `first` needed this rank's queued operation to finish `second`... or not,
    // depending on parity; either way it completes without a wait() here.
    const auto until = std::chrono::steady_clock::now() + 5s;
    while (!pending->done() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(1ms);
    QVERIFY(pending->done());
    pending->wait();
    QCOMPARE(x[49999], static_cast<float>(n * (n + 1) / 2));
    QCOMPARE(y[776], static_cast<float>(n));
  }

  // A handle dropped before its collective ran (what an exception does) leaves the caller's
  // buffer alone: the collective still runs, for the peers, on a private copy.
  void droppedHandleRunsOnACopy() {
    auto comm = make_mpi_world(test_options());
    const int r = comm->rank(), n = comm->size();
    std::vector<float> v(1000, static_cast<float>(r + 1));
    if (r == 0) {
      comm->all_reduce_async(v, ReduceOp::Sum);  // the handle is dropped at once
      std::fill(v.begin(), v.end(), -5.0f);      // the buffer is the caller's again
    } else {
      comm->all_reduce(v, ReduceOp::Sum);
      QCOMPARE(v[999], static_cast<float>(n * (n + 1) / 2));  // rank 0 still contributed 1
    }
    comm->barrier();
    if (r == 0) QCOMPARE(v[999], -5.0f);
  }

  // A receive that nobody sends to times out (and is cancelled, so nothing is left inside MPI).
  void recvTimeout() {
    auto world = make_mpi_world(test_options());
    CommOptions fast;
    fast.timeout = 200ms;
    auto comm = make_mpi_world(fast);
    if (comm->rank() == 0) {
      std::vector<float> in(4);
      const std::string msg = error_of<TimeoutError>([&] { comm->recv(in, 1, 77); });
      QVERIFY2(contains(msg, "recv on group world"), msg.c_str());
      QVERIFY2(contains(msg, "from rank 1 (tag 77) timed out after 200 ms"), msg.c_str());
      QCOMPARE(mpi_detail::unfinished_operations(), 0);
    }
    world->barrier();
  }
};

int main(int argc, char** argv) {
  try {
    // Inside the try: if something throws, MPI_Finalize is skipped and mpirun ends the job.
    MpiSession session(&argc, &argv);
    g_session = &session;
    if (argc < 2 || std::atoi(argv[1]) < 1) {
      std::fprintf(stderr, "usage: mpirun -np N %s N [qtest options]\n", argv[0]);
      return 2;
    }
    g_expected_size = std::atoi(argv[1]);
    // Qt Test gets the rest; ranks other than 0 print failures only, not N interleaved logs.
    std::vector<char*> args = {argv[0]};
    char silent[] = "-silent";
    if (session.world_rank() != 0) args.push_back(silent);
    for (int i = 2; i < argc; ++i) args.push_back(argv[i]);
    int qargc = static_cast<int>(args.size());
    QCoreApplication app(qargc, args.data());
    TstCommMpi suite;
    const int failed = QTest::qExec(&suite, qargc, args.data());
    if (failed) std::fprintf(stderr, "rank %d: %d test(s) failed\n", session.world_rank(), failed);
    return failed ? 1 : 0;
  } catch (const shardlab::Error& e) {
    std::fprintf(stderr, "tst_comm_mpi: %s\n", e.what());
    return 1;
  }
}

#include "tst_comm_mpi.moc"
