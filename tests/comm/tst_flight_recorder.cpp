// The flight recorder (engine/comm/flight_recorder.h): the ring itself (wrap-around, states,
// text and JSON, atomic writes) and how the threads backend records into it: one ring per rank
// shared by its sub-groups, and on a timeout the ranks that waited write their rings, which name
// the collective and the rank that never came. Rank threads never use QVERIFY: they store what
// they saw and the slot checks it after run_threads returns.
#include <QtTest>

#include <map>
#include <mutex>
#include <thread>

#include "engine/comm/flight_recorder.h"
#include "engine/comm/threads/world.h"
#include "engine/core/timer.h"
#include "tests/common/caught.h"
#include "tests/common/process.h"
#include "tests/common/text.h"

using namespace shardlab;
using shardlab::test::contains;
using shardlab::test::RankOutcomes;
using namespace std::chrono_literals;
using State = FlightRecorder::State;

namespace {

CommRecord record_of(CommOp op, uint64_t seq, const std::string& group = "world") {
  CommRecord r;
  r.op = op;
  r.group = group;
  r.rank = 0;
  r.group_size = 2;
  r.seq = seq;
  r.bytes = 4 * 1024 * 1024;
  r.start = Clock::now();
  return r;
}

QJsonObject read_json(const QString& path) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) return {};
  return QJsonDocument::fromJson(f.readAll()).object();
}

QString read_text(const QString& path) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) return {};
  return QString::fromUtf8(f.readAll());
}

}  // namespace

class TestFlightRecorder : public QObject {
  Q_OBJECT
 private slots:
  void wrapAroundKeepsTheNewestInOrder() {
    FlightRecorder fr;  // 256 by default
    QCOMPARE(fr.capacity(), size_t{256});
    std::vector<uint64_t> ids;
    for (uint64_t s = 0; s < 300; ++s) ids.push_back(fr.issued(record_of(CommOp::AllReduce, s)));
    for (uint64_t id : ids) fr.completed(id);  // the 44 overwritten ones are ignored
    fr.failed(ids[0], State::Failed, "too late");
    const auto all = fr.snapshot();
    QCOMPARE(all.size(), size_t{256});
    QCOMPARE(fr.total(), uint64_t{300});
    for (size_t i = 0; i < all.size(); ++i) {
      QCOMPARE(all[i].seq, uint64_t{44 + i});
      QCOMPARE(all[i].id, ids[44 + i]);
      QVERIFY(all[i].state == State::Completed);
      QVERIFY(all[i].error.empty());
    }
    // A small ring wraps the same way, and keeps entries still in flight.
    FlightRecorder small(FlightRecorderOptions{.capacity = 3, .rank = 7});
    for (uint64_t s = 0; s < 5; ++s) small.issued(record_of(CommOp::Barrier, s));
    const auto three = small.snapshot();
    QCOMPARE(three.size(), size_t{3});
    QCOMPARE(three.front().seq, uint64_t{2});
    QCOMPARE(three.back().seq, uint64_t{4});
    QVERIFY(three.back().state == State::Issued);
    QVERIFY(contains(small.to_text(), "NOT COMPLETED"));
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, FlightRecorder(FlightRecorderOptions{.capacity = 0}));
  }

  // A group name or error with bytes that are not UTF-8 (a rank's text in another encoding, or
  // cut mid-character) still makes valid JSON: each bad byte becomes U+FFFD, valid UTF-8 stays.
  void invalidUtf8StaysValidJson() {
    FlightRecorder fr(FlightRecorderOptions{.capacity = 4, .rank = 0});
    const std::string group = std::string("dp\xff[1]\xc3");  // a stray byte, a cut sequence
    const uint64_t a = fr.issued(record_of(CommOp::AllReduce, 1, group));
    fr.failed(a, State::Failed, "na\xefve \xc3\xa9t\xe9 <b>");
    const QByteArray json = QByteArray::fromStdString(fr.to_json());
    QJsonParseError err;
    const QJsonDocument doc = QJsonDocument::fromJson(json, &err);
    QVERIFY2(err.error == QJsonParseError::NoError, qPrintable(err.errorString()));
    const QJsonObject e = doc.object()["entries"].toArray()[0].toObject();
    QCOMPARE(e["group"].toString(), QString::fromUtf8("dp\uFFFD[1]\uFFFD"));
    QCOMPARE(e["error"].toString(), QString::fromUtf8("na\uFFFDve \u00e9t\uFFFD <b>"));
    // Strictly: the bytes are valid UTF-8 (QString's lenient decoding would hide a bad byte).
    QVERIFY(QString::fromUtf8(json).toUtf8() == json);
  }

  void statesTextAndJson() {
    FlightRecorder fr(FlightRecorderOptions{.capacity = 8, .rank = 3});
    const uint64_t a = fr.issued(record_of(CommOp::AllReduce, 57, "dp[1]"));
    const uint64_t b = fr.issued(record_of(CommOp::AllGather, 58, "dp[1]"));
    const uint64_t c = fr.issued(record_of(CommOp::Broadcast, 59, "tp[0]"));
    fr.completed(a);
    fr.failed(b, State::TimedOut, "ranks 1 had not arrived");
    fr.failed(b, State::Failed, "a later, vaguer report");  // the first message wins
    fr.failed(c, State::Failed, {});
    fr.failed(c, State::Failed, "peer \"2\" failed\nbadly");  // fills the missing message
    fr.completed(c);                                          // too late: it failed
    const auto all = fr.snapshot();
    QCOMPARE(all.size(), size_t{3});
    QVERIFY(all[0].state == State::Completed);
    QVERIFY(all[1].state == State::TimedOut);
    QCOMPARE(all[1].error, std::string("ranks 1 had not arrived"));
    QVERIFY(all[2].state == State::Failed);
    QVERIFY(all[0].completed >= all[0].issued);

    const std::string text = fr.to_text();
    QVERIFY2(contains(text, "flight record of rank 3"), text.c_str());
    QVERIFY2(contains(text, "#57 all_reduce dp[1] rank 0/2 4.0 MiB issued "), text.c_str());
    QVERIFY2(contains(text, " completed "), text.c_str());
    QVERIFY2(contains(text, "#58 all_gather dp[1] rank 0/2 4.0 MiB issued "), text.c_str());
    QVERIFY2(contains(text, "-- TIMED OUT at "), text.c_str());
    QVERIFY2(contains(text, ": ranks 1 had not arrived\n"), text.c_str());
    QVERIFY2(contains(text, "#59 broadcast tp[0] rank 0/2 root -1"), text.c_str());
    QVERIFY2(contains(text, "failed badly"), text.c_str());  // one line per entry

    QJsonParseError err;
    const QJsonDocument doc =
        QJsonDocument::fromJson(QByteArray::fromStdString(fr.to_json()), &err);
    QVERIFY2(err.error == QJsonParseError::NoError, qPrintable(err.errorString()));
    const QJsonObject o = doc.object();
    QCOMPARE(o["rank"].toInt(), 3);
    QCOMPARE(o["capacity"].toInt(), 8);
    const QJsonArray entries = o["entries"].toArray();
    QCOMPARE(entries.size(), 3);
    QCOMPARE(entries[1].toObject()["state"].toString(), QString("timed_out"));
    QCOMPARE(entries[1].toObject()["group"].toString(), QString("dp[1]"));
    QCOMPARE(entries[2].toObject()["error"].toString(), QString("peer \"2\" failed\nbadly"));

    // write(): by extension, atomically (nothing left beside the file).
    QTemporaryDir dir;
    const std::string txt = (dir.path() + "/r.txt").toStdString();
    const std::string json = (dir.path() + "/r.json").toStdString();
    fr.write(txt);
    fr.write(json);
    fr.write(json);  // replaces
    QCOMPARE(read_text(QString::fromStdString(txt)).toStdString(), text);
    QCOMPARE(read_json(QString::fromStdString(json))["entries"].toArray().size(), 3);
    QCOMPARE(QDir(dir.path()).entryList(QDir::Files).size(), 2);
    QVERIFY_THROWS_EXCEPTION(IoError, fr.write(dir.path().toStdString() + "/no/such/dir/x.txt"));
  }

  // Every kind of operation lands in its rank's ring, completed, with its fields.
  void completedOperationsOfAThreadWorld() {
    CommOptions o;
    o.timeout = 30s;
    std::vector<std::vector<FlightRecorder::Entry>> rings(2);
    run_threads(2, o, [&](Communicator& comm) {
      std::vector<float> v(10, 1.0f), half(5), whole(10);
      comm.all_reduce(v, ReduceOp::Sum);
      comm.reduce_scatter(v, half, ReduceOp::Avg);
      comm.all_gather(half, whole);
      comm.broadcast(v, 1);
      comm.barrier();
      if (comm.rank() == 0) comm.send(half, 1, 4);
      if (comm.rank() == 1) comm.recv(half, 0, 4);
      rings[static_cast<size_t>(comm.rank())] = comm.options().flight_recorder->snapshot();
    });
    const CommOp ops[] = {CommOp::AllReduce, CommOp::ReduceScatter, CommOp::AllGather,
                          CommOp::Broadcast, CommOp::Barrier};
    for (int r = 0; r < 2; ++r) {
      const auto& ring = rings[static_cast<size_t>(r)];
      QCOMPARE(ring.size(), size_t{6});
      for (size_t i = 0; i < 5; ++i) {
        QVERIFY(ring[i].op == ops[i]);
        QCOMPARE(ring[i].seq, uint64_t{i});
        QCOMPARE(ring[i].group, std::string("world"));
        QCOMPARE(ring[i].group_rank, r);
        QCOMPARE(ring[i].group_size, 2);
      }
      QCOMPARE(ring[0].bytes, int64_t{40});
      QCOMPARE(ring[3].peer, 1);  // broadcast: the root
      QVERIFY(ring[5].op == (r == 0 ? CommOp::Send : CommOp::Recv));
      QCOMPARE(ring[5].peer, 1 - r);
      QCOMPARE(ring[5].tag, 4);
      for (const auto& e : ring) {
        QVERIFY2(e.state == State::Completed, to_string(e.state));
        QVERIFY(e.completed >= e.issued);
      }
    }
  }

  // Rank 3 never calls the 5th all_reduce: ranks 0-2 time out, say so naming rank 3, and write
  // rings whose last entry is that all_reduce, timed out, naming rank 3.
  void timeoutWritesTheRingsNamingTheMissingRank() {
    QTemporaryDir dir;
    CommOptions o;
    o.timeout = 300ms;
    o.flight_dir = (dir.path() + "/flight").toStdString();  // created on demand
    RankOutcomes got;
    Stopwatch sw;
    run_threads(4, o, [&](Communicator& comm) {
      std::vector<float> v(1000, 1.0f);
      for (int i = 0; i < 4; ++i) comm.all_reduce(v, ReduceOp::Sum);
      if (comm.rank() != 3) got.capture(comm.rank(), [&] { comm.all_reduce(v, ReduceOp::Sum); });
    });
    QVERIFY2(sw.seconds() < 3.0, qPrintable(QString("took %1 s").arg(sw.seconds())));
    const QString fdir = dir.path() + "/flight";
    for (int r = 0; r < 3; ++r) {
      const std::string& m = got.message[r];
      const QString txt = fdir + QString("/flight-rank%1.txt").arg(r);
      QVERIFY2(got.type[r] == "TimeoutError", m.c_str());
      QVERIFY2(contains(m, "all_reduce on group world (seq 4)"), m.c_str());
      QVERIFY2(contains(m, "rank 3 had not arrived"), m.c_str());
      QVERIFY2(contains(m, "; flight record (last 5 operations of rank " + std::to_string(r) +
                               ") written to " + txt.toStdString()),
               m.c_str());

      const QJsonObject j = read_json(fdir + QString("/flight-rank%1.json").arg(r));
      QCOMPARE(j["rank"].toInt(), r);
      const QJsonArray entries = j["entries"].toArray();
      QCOMPARE(entries.size(), 5);
      for (int i = 0; i < 4; ++i) {
        QCOMPARE(entries[i].toObject()["state"].toString(), QString("completed"));
        QCOMPARE(entries[i].toObject()["seq"].toInt(), i);
      }
      const QJsonObject last = entries[4].toObject();
      QCOMPARE(last["op"].toString(), QString("all_reduce"));
      QCOMPARE(last["group"].toString(), QString("world"));
      QCOMPARE(last["seq"].toInt(), 4);
      QCOMPARE(last["state"].toString(), QString("timed_out"));
      QVERIFY2(last["error"].toString().contains("rank 3 had not arrived"),
               qPrintable(last["error"].toString()));

      const QStringList lines = read_text(txt).split('\n', Qt::SkipEmptyParts);
      QCOMPARE(lines.size(), 6);  // header + 5
      QVERIFY2(lines[4].contains(" completed "), qPrintable(lines[4]));
      QVERIFY2(lines[5].startsWith("#4 all_reduce world rank " + QString::number(r) + "/4"),
               qPrintable(lines[5]));
      QVERIFY2(lines[5].contains("TIMED OUT") && lines[5].contains("rank 3 had not arrived"),
               qPrintable(lines[5]));
    }
    // Rank 3 had nothing fail: no file.
    QVERIFY(!QFile::exists(fdir + "/flight-rank3.txt"));
  }

  // A rank's sub-groups record into its one ring, under their own names.
  void subGroupsShareTheRank_sRing() {
    CommOptions o;
    o.timeout = 30s;
    std::vector<std::vector<FlightRecorder::Entry>> rings(4);
    std::vector<int> shared(4, 0);
    run_threads(4, o, [&](Communicator& comm) {
      const int color = comm.rank() % 2;
      auto dp = comm.split(color, comm.rank(), fmt::format("dp[{}]", color));
      std::vector<float> v(8, 1.0f);
      comm.all_reduce(v, ReduceOp::Sum);
      dp->all_reduce(v, ReduceOp::Sum);
      dp->barrier();
      comm.barrier();
      const size_t r = static_cast<size_t>(comm.rank());
      shared[r] = dp->options().flight_recorder == comm.options().flight_recorder;
      rings[r] = comm.options().flight_recorder->snapshot();
    });
    for (int r = 0; r < 4; ++r) {
      const auto& ring = rings[static_cast<size_t>(r)];
      QVERIFY(shared[static_cast<size_t>(r)]);
      QCOMPARE(ring.size(), size_t{4});  // split is not an operation of its own
      const std::string dp = fmt::format("dp[{}]", r % 2);
      const std::string want[] = {"world", dp, dp, "world"};
      for (size_t i = 0; i < 4; ++i) {
        QCOMPARE(ring[i].group, want[i]);
        QVERIFY(ring[i].state == State::Completed);
        if (i > 0) QVERIFY(ring[i].id > ring[i - 1].id);
      }
      QCOMPARE(ring[1].group_rank, r / 2);
      QCOMPARE(ring[1].group_size, 2);
      QCOMPARE(ring[1].seq, uint64_t{0});
      QCOMPARE(ring[2].seq, uint64_t{1});
      QCOMPARE(ring[3].seq, uint64_t{2});  // world: split took seq 0, the all_reduce 1
    }
  }

  // A sub-group's timeout: the file is named by the world rank, the entry by the group and the
  // group ranks.
  void subGroupTimeoutIsWrittenUnderTheWorldRank() {
    QTemporaryDir dir;
    CommOptions o;
    o.timeout = 300ms;
    o.flight_dir = dir.path().toStdString();
    RankOutcomes got;
    run_threads(4, o, [&](Communicator& comm) {
      const int color = comm.rank() % 2;
      auto dp = comm.split(color, comm.rank(), fmt::format("dp[{}]", color));
      std::vector<float> v(8, 1.0f);
      dp->all_reduce(v, ReduceOp::Sum);
      // World rank 3 (rank 1 of dp[1]) skips this one; world rank 1 waits for it.
      if (comm.rank() == 1) got.capture(1, [&] { dp->all_reduce(v, ReduceOp::Sum); });
      // Leaving would make it a departure (CommError, also written) instead of a timeout.
      if (comm.rank() == 3) std::this_thread::sleep_for(600ms);
    });
    const std::string& m = got.message[1];
    QVERIFY2(got.type[1] == "TimeoutError", m.c_str());
    QVERIFY2(contains(m, "all_reduce on group dp[1] (seq 1)"), m.c_str());
    QVERIFY2(contains(m, "rank 1 had not arrived"), m.c_str());  // dp[1]'s rank 1 = world rank 3
    QVERIFY2(contains(m, "/flight-rank1.txt"), m.c_str());
    const QJsonArray e = read_json(dir.path() + "/flight-rank1.json")["entries"].toArray();
    QCOMPARE(e.size(), 2);
    QCOMPARE(e[0].toObject()["state"].toString(), QString("completed"));
    QCOMPARE(e[1].toObject()["group"].toString(), QString("dp[1]"));
    QCOMPARE(e[1].toObject()["group_rank"].toInt(), 0);
    QCOMPARE(e[1].toObject()["state"].toString(), QString("timed_out"));
    QVERIFY(QDir(dir.path()).entryList(QDir::Files).size() == 2);  // rank 1's .txt and .json
  }

  // A receive that times out is recorded as such; without flight_dir nothing is written and the
  // message is unchanged.
  void recvTimeoutIsRecorded() {
    CommOptions o;
    o.timeout = 200ms;
    RankOutcomes got;
    std::vector<FlightRecorder::Entry> ring;
    run_threads(2, o, [&](Communicator& comm) {
      std::vector<float> v(3);
      if (comm.rank() == 1) {
        got.capture(1, [&] { comm.recv(v, 0, 7); });
        ring = comm.options().flight_recorder->snapshot();
      }
    });
    QCOMPARE(got.type[1], std::string("TimeoutError"));
    QVERIFY2(!contains(got.message[1], "flight record"), got.message[1].c_str());
    QCOMPARE(ring.size(), size_t{1});
    QVERIFY(ring[0].op == CommOp::Recv && ring[0].state == State::TimedOut);
    QVERIFY2(contains(ring[0].error, "no message from rank 0 with tag 7"), ring[0].error.c_str());
  }

  void recorderOptions() {
    // One recorder cannot be several ranks' ring.
    CommOptions o;
    o.flight_recorder = std::make_shared<FlightRecorder>();
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, make_thread_world(2, o));
    auto one = make_thread_world(1, o);
    QCOMPARE(one[0]->options().flight_recorder, o.flight_recorder);
    QCOMPARE(o.flight_recorder->rank(), 0);
    // flight_capacity: the size of each rank's ring; 0 records nothing.
    CommOptions small;
    small.flight_capacity = 16;
    auto world = make_thread_world(3, small);
    for (int r = 0; r < 3; ++r) {
      const auto& fr = world[static_cast<size_t>(r)]->options().flight_recorder;
      QVERIFY(fr);
      QCOMPARE(fr->capacity(), size_t{16});
      QCOMPARE(fr->rank(), r);
    }
    CommOptions off;
    off.flight_capacity = 0;
    QVERIFY(!make_thread_world(2, off)[1]->options().flight_recorder);
  }

  // The cost of recording: the recorder alone per operation, and small all-reduces on a threads
  // world of 2 with and without it. Reported, and bounded loosely (shared CI machines).
  void overhead() {
    FlightRecorder fr;
    const CommRecord rec = record_of(CommOp::AllReduce, 0, "dp[1]");
    constexpr int kOps = 200000;
    Stopwatch sw;
    // As communicators call it: the completion time is the record's, taken already.
    for (int i = 0; i < kOps; ++i) fr.completed(fr.issued(rec), rec.start);
    const double ns_per_op = sw.seconds() / kOps * 1e9;

    // One rank: the communicator's whole path (queue, execute, records) without a peer to wait
    // for, so the difference is the recorder's. Interleaved, best of 7, against load.
    auto run = [](size_t capacity) {
      CommOptions o;
      o.timeout = 30s;
      o.flight_capacity = capacity;
      double us = 0;
      run_threads(1, o, [&](Communicator& comm) {
        std::vector<float> v(256, 1.0f);
        for (int i = 0; i < 500; ++i) comm.all_reduce(v, ReduceOp::Sum);  // warm up
        constexpr int kN = 20000;
        Stopwatch t;
        for (int i = 0; i < kN; ++i) comm.all_reduce(v, ReduceOp::Sum);
        us = t.seconds() / kN * 1e6;
      });
      return us;
    };
    double us_off = 1e9, us_on = 1e9;
    for (int rep = 0; rep < 7; ++rep) {
      us_off = std::min(us_off, run(0));
      us_on = std::min(us_on, run(256));
    }
    qInfo(
        "flight recorder: issued+completed %.0f ns per operation; a blocking all_reduce of "
        "1 KiB on a 1-rank threads world: %.3f us without, %.3f us with (%+.0f ns)",
        ns_per_op, us_off, us_on, (us_on - us_off) * 1000);
    QVERIFY2(ns_per_op < 2000, qPrintable(QString("%1 ns per operation").arg(ns_per_op)));
  }

  // The JSON record follows its published schema (resources/schemas/flight-record.schema.json),
  // checked by an independent validator (python3-jsonschema, tests/comm/check_json_schema.py):
  // a ring with every op and state, and the rings the threads backend writes on a real timeout.
  // The schema has teeth: a record with a made-up state, or a completed entry without its time,
  // fails it. Skips when /usr/bin/python3 or its jsonschema module is missing.
  void jsonFollowsItsSchema() {
    QTemporaryDir dir;
    FlightRecorder fr(FlightRecorderOptions{.capacity = 16, .rank = 2});
    const CommOp ops[] = {CommOp::AllReduce, CommOp::ReduceScatter, CommOp::AllGather,
                          CommOp::Broadcast, CommOp::Barrier,       CommOp::Send,
                          CommOp::Recv};
    uint64_t seq = 0;
    for (const CommOp op : ops) {
      CommRecord r = record_of(op, seq++, "tp[0]");
      if (op == CommOp::Send || op == CommOp::Recv) r.peer = 1, r.tag = 7;
      if (op == CommOp::Broadcast) r.peer = 0;
      fr.completed(fr.issued(r));
    }
    fr.failed(fr.issued(record_of(CommOp::AllReduce, seq++)), State::TimedOut,
              "all_reduce on group world timed out: rank 1 had not arrived");
    fr.failed(fr.issued(record_of(CommOp::AllGather, seq++)), State::Failed,
              "peer \"1\" failed\nbadly");
    fr.issued(record_of(CommOp::ReduceScatter, seq++));  // still in flight
    const QString unit = dir.filePath("unit.json");
    fr.write(unit.toStdString());

    CommOptions o;
    o.timeout = 200ms;
    o.flight_dir = dir.filePath("flight").toStdString();
    RankOutcomes got;
    run_threads(2, o, [&](Communicator& comm) {
      std::vector<float> v(64, 1.0f);
      comm.all_reduce(v, ReduceOp::Sum);
      if (comm.rank() == 0) got.capture(0, [&] { comm.all_reduce(v, ReduceOp::Sum); });
    });
    QVERIFY2(got.type[0] == "TimeoutError", got.message[0].c_str());
    const QString dumped = dir.filePath("flight/flight-rank0.json");
    QCOMPARE(read_json(dumped)["format"].toString(), QString("shardlab-flight-record"));
    QCOMPARE(read_json(dumped)["version"].toInt(), 1);

    const QString python = "/usr/bin/python3";
    if (!QFile::exists(python)) QSKIP("no /usr/bin/python3 to run the schema check");
    const QString check = SHARDLAB_SOURCE_DIR "/tests/comm/check_json_schema.py";
    const QString schema = SHARDLAB_SOURCE_DIR "/resources/schemas/flight-record.schema.json";
    const test::ProcessOutcome ok = test::run_process(python, {check, schema, unit, dumped});
    if (ok.exit_code == 2 && ok.err.contains("missing Python module"))
      QSKIP(qPrintable("the schema check cannot run: " + ok.err.trimmed()));
    QVERIFY2(ok.exit_code == 0, qPrintable(ok.out + ok.err));

    // The same record broken two ways: the validator names both.
    QByteArray bad;
    {
      QFile f(unit);
      QVERIFY(f.open(QIODevice::ReadOnly));
      bad = f.readAll();
    }
    QVERIFY(bad.contains("\"state\":\"completed\""));
    bad.replace("\"state\":\"timed_out\"", "\"state\":\"stuck\"");
    const int first = bad.indexOf(",\"completed_s\":");
    QVERIFY(first > 0);
    bad.remove(first, bad.indexOf('}', first) - first);  // the first entry's completion time
    const QString broken = dir.filePath("broken.json");
    {
      QFile f(broken);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write(bad);
    }
    const test::ProcessOutcome no = test::run_process(python, {check, schema, broken});
    QVERIFY2(no.exit_code == 1, qPrintable(no.out + no.err));
    QVERIFY2(no.err.contains("entries/7/state: 'stuck'"), qPrintable(no.err));
    QVERIFY2(no.err.contains("entries/0: 'completed_s' is a required property"),
             qPrintable(no.err));
  }
};

QTEST_GUILESS_MAIN(TestFlightRecorder)
#include "tst_flight_recorder.moc"
