// The run model (latest state per rank, stragglers, silent ranks, the table) and the exporters
// (Chrome trace JSON, step CSV).
#include <QtTest>

#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "net/exporters.h"
#include "net/run_model.h"
#include "tests/common/telemetry_events.h"

using namespace shardlab;
using namespace shardlab::net;
namespace tl = shardlab::telemetry;
using nlohmann::json;

namespace {

constexpr double kT0 = 1.7e9;

// Rank `rank` of 4 in 2 pipeline stages of 2 tensor-parallel ranks.
Hello hello(int rank) {
  Hello h = test::grid_hello("job", rank, 4, 2, 2, 1);
  h.host = "node";
  h.pid = 100 + rank;
  return h;
}

tl::Event make_event(int rank, double time, tl::Payload payload) {
  static std::map<int, uint64_t> seq;
  tl::Event e;
  e.rank = rank;
  e.seq = seq[rank]++;
  e.time = time;
  e.payload = std::move(payload);
  return e;
}

tl::StepEvent step(int64_t n, double loss, double seconds) {
  tl::StepEvent s;
  s.step = n;
  s.loss = loss;
  s.lr = 0.01;
  s.grad_norm = 0.5;
  s.throughput = 1000;
  s.step_seconds = seconds;
  return s;
}

// A CSV line's cells, a trailing empty one included (a rank without a HELLO has no host, the
// last column).
std::vector<std::string> csv_cells(const std::string& line) {
  std::vector<std::string> cells;
  std::stringstream ss(line);
  std::string cell;
  while (std::getline(ss, cell, ',')) cells.push_back(cell);
  if (line.ends_with(',')) cells.push_back("");  // getline does not read it as a cell
  return cells;
}

// 4 ranks, `steps` steps each of 0.1 s; `slow_rank`'s last step takes `slow_factor` times longer.
std::vector<Message> run(int steps, int slow_rank = -1, double slow_factor = 1.0) {
  std::vector<Message> out;
  for (int r = 0; r < 4; ++r) out.emplace_back(hello(r));
  for (int i = 1; i <= steps; ++i)
    for (int r = 0; r < 4; ++r) {
      const double sec = (r == slow_rank && i == steps) ? 0.1 * slow_factor : 0.1;
      out.emplace_back(make_event(r, kT0 + i * 0.1, step(i, 3.0 / (i + r + 1), sec)));
    }
  return out;
}

RunModel model_of(const std::vector<Message>& msgs) {
  RunModel m;
  for (const auto& msg : msgs) m.add(msg);
  return m;
}

// Messages with every kind of event for the exporters.
std::vector<Message> trace_messages() {
  std::vector<Message> out;
  for (int r = 0; r < 4; ++r) out.emplace_back(hello(r));
  for (int i = 1; i <= 3; ++i)
    for (int r = 0; r < 4; ++r) {
      const double t = kT0 + i;
      out.emplace_back(
          make_event(r, t - 0.5, tl::PhaseEvent{r / 2, i, tl::Phase::forward, t - 0.9, t - 0.6}));
      out.emplace_back(
          make_event(r, t - 0.4, tl::PhaseEvent{r / 2, i, tl::Phase::backward, t - 0.6, t - 0.45}));
      out.emplace_back(make_event(
          r, t - 0.1,
          tl::CollectiveEvent{"all_reduce", "tp[" + std::to_string(r / 2) + "]", 4096 * (r + 1),
                              t - 0.3, 0.05, 10, 20.5, static_cast<uint64_t>(i), true}));
      out.emplace_back(make_event(r, t, step(i, 1.0 / (3 * i + r), 0.9)));
      out.emplace_back(make_event(r, t, tl::HeartbeatEvent{}));
    }
  return out;
}

}  // namespace

class TestRunModel : public QObject {
  Q_OBJECT

 private slots:
  // A long run (or a peer sending millions of STEPs) keeps a bounded series per rank, evenly
  // spread: point i is the (i * stride + 1)-th step, with its own loss.
  void seriesAreBounded() {
    RunModel m;
    m.add(Message(hello(0)));
    constexpr int64_t kSteps = 300000;
    for (int64_t n = 1; n <= kSteps; ++n)
      m.add(Message(make_event(0, 1.0 + 1e-3 * static_cast<double>(n),
                               step(n, 1.0 / static_cast<double>(n), 0.01))));
    const RankState& r = m.ranks().at(0);
    QVERIFY2(r.loss_series.size() <= kMaxSeriesPoints,
             qPrintable(QString::number(r.loss_series.size())));
    QVERIFY(r.loss_series.size() >= kMaxSeriesPoints / 4);
    QCOMPARE(r.step_times.size(), r.loss_series.size());
    QVERIFY(r.series_stride > 1 && (r.series_stride & (r.series_stride - 1)) == 0);
    QCOMPARE(r.series_steps, kSteps);
    for (size_t i = 0; i < r.loss_series.size(); i += 997)
      QCOMPARE(r.loss_series[i],
               1.0 / static_cast<double>(static_cast<int64_t>(i) * r.series_stride + 1));
    QCOMPARE(r.step, kSteps);  // the latest state is exact
  }

  // Evaluations are bounded the same way (a peer sending millions of EVALs): at most
  // kMaxSeriesPoints per rank, evenly spread (evaluation i held is the (i * eval_stride + 1)-th
  // received), each with its own step; the newest is still the one the table names.
  void evalsAreBounded() {
    RunModel m;
    m.add(Message(hello(0)));
    constexpr int64_t kEvals = 3 * static_cast<int64_t>(kMaxSeriesPoints) + 5;
    constexpr int64_t kEvery = 10;  // an evaluation every 10 steps
    for (int64_t k = 1; k <= kEvals; ++k)
      m.add(Message(make_event(
          0, 1.0 + 1e-3 * static_cast<double>(k),
          tl::EvalEvent{k * kEvery, 1.0 / static_cast<double>(k), 0.5, static_cast<int64_t>(k)})));
    const RankState& r = m.ranks().at(0);
    QVERIFY2(r.evals.size() <= kMaxSeriesPoints, qPrintable(QString::number(r.evals.size())));
    QVERIFY(r.evals.size() >= kMaxSeriesPoints / 4);
    QVERIFY(r.eval_stride > 1 && (r.eval_stride & (r.eval_stride - 1)) == 0);
    QCOMPARE(r.evals_seen, kEvals);
    for (size_t i = 0; i < r.evals.size(); ++i) {
      const int64_t k = static_cast<int64_t>(i) * r.eval_stride + 1;  // which evaluation
      if (r.evals[i].step != k * kEvery || r.evals[i].samples != k)
        QFAIL(qPrintable(QString("evals[%1]: step %2, samples %3; want step %4")
                             .arg(i)
                             .arg(r.evals[i].step)
                             .arg(r.evals[i].samples)
                             .arg(k * kEvery)));
      QCOMPARE(r.evals[i].loss, 1.0 / static_cast<double>(k));
    }
    // The newest evaluation is exact, whether or not the thinned list holds it.
    QVERIFY(r.last_eval.has_value());
    QCOMPARE(r.last_eval->step, kEvals * kEvery);
    const QString table = QString::fromStdString(m.table(2.0));
    QVERIFY2(table.contains(QString("eval at step %1:").arg(kEvals * kEvery)), qPrintable(table));
  }

  // What a peer sends reaches the terminal without control characters: a host name or failure
  // reason carrying escape sequences (clear the screen, retitle the terminal) is shown with '?'
  // in their place, and capped in length.
  void wireTextIsPrintable() {
    RunModel m;
    Hello h = hello(0);
    h.host = "evil\x1b[2J\x1b[H";
    m.add(Message(h));
    m.add(Message(make_event(
        0, 1.0,
        tl::JobStateEvent{tl::JobState::failed, "oom\x1b]0;pwned\x07" + std::string(5000, 'r')})));
    const std::string table = m.table(2.0);
    for (const char c : table)
      QVERIFY2(static_cast<unsigned char>(c) >= 0x20 || c == '\n',
               qPrintable(QString::fromStdString(table)));
    QCOMPARE(m.ranks().at(0).hello->host, std::string("evil?[2J?[H"));
    QVERIFY(m.ranks().at(0).reason.rfind("oom?]0;pwned?", 0) == 0);
    QVERIFY(m.ranks().at(0).reason.size() < 600);
  }

  void latestStatePerRank() {
    auto msgs = run(5);
    tl::MemoryEvent mem;
    mem.current = {3 << 20, 1 << 20, 2 << 20, 512 << 10, 0};
    mem.peak = {3 << 20, 1 << 20, 2 << 20, 1 << 20, 0};
    msgs.emplace_back(make_event(1, kT0 + 1, mem));
    mem.current[3] = 0;  // activations released
    msgs.emplace_back(make_event(1, kT0 + 1.1, mem));
    msgs.emplace_back(
        make_event(2, kT0 + 1.2,
                   tl::CollectiveEvent{"all_reduce", "world", 100, kT0 + 1, 0.25, 1, 1, 1, true}));
    msgs.emplace_back(make_event(
        2, kT0 + 1.3, tl::CollectiveEvent{"send", "pp", 100, kT0 + 1.1, 0.5, 1, 1, 2, true}));
    msgs.emplace_back(make_event(3, kT0 + 2, tl::JobStateEvent{tl::JobState::failed, "oom"}));
    msgs.emplace_back(Challenge{});  // handshake messages are ignored
    const RunModel m = model_of(msgs);

    QCOMPARE(m.ranks().size(), size_t{4});
    QCOMPARE(m.events(), uint64_t{4 * 5 + 5});
    for (int r = 0; r < 4; ++r) {
      const RankState& s = m.ranks().at(r);
      QVERIFY(s.hello.has_value());
      QCOMPARE(s.hello->pid, int64_t{100 + r});
      QCOMPARE(s.step, int64_t{5});
      QCOMPARE(s.loss, 3.0 / (5 + r + 1));
      QCOMPARE(s.step_times.size(), size_t{5});
      QCOMPARE(s.loss_series.size(), size_t{5});
      QCOMPARE(s.loss_series.front(), 3.0 / (1 + r + 1));
      QCOMPARE(s.throughput, 1000.0);
    }
    QCOMPARE(m.ranks().at(0).state, tl::JobState::running);
    QCOMPARE(m.ranks().at(0).last_seen, kT0 + 0.5);
    QCOMPARE(m.ranks().at(1).memory[3], int64_t{0});
    QCOMPARE(m.ranks().at(1).memory[0], int64_t{3 << 20});
    QCOMPARE(m.ranks().at(1).memory_peak, int64_t{(6 << 20) + (512 << 10)});
    QCOMPARE(m.ranks().at(1).last_seen, kT0 + 1.1);
    QCOMPARE(m.ranks().at(2).collectives, int64_t{2});
    QCOMPARE(m.ranks().at(2).comm_seconds, 0.75);
    QCOMPARE(m.ranks().at(3).state, tl::JobState::failed);
    QCOMPARE(m.ranks().at(3).reason, std::string("oom"));
  }

  // The straggler is the rank the others wait for (tst_time_accounting covers the rules): a step
  // time alone, however long, names nobody (the old step-time flag is gone: synchronous
  // collectives make every rank's step equally long, so it flagged the wrong ranks).
  void stragglers() {
    RunModel m = model_of(run(30, 2, 3.0));
    QVERIFY(!m.straggler(2));
    QVERIFY(!m.straggler(0));
    QVERIFY(!m.straggler(1));
    QVERIFY(!m.straggler(3));
    QVERIFY(!m.straggler(7));  // unknown rank

    m = model_of(run(30));
    for (int r = 0; r < 4; ++r) QVERIFY(!m.straggler(r));

    // Every rank's latest step slow at once (an evaluation, a busy machine): nobody straggles.
    {
      RunModel all = model_of(run(30));
      for (int r = 0; r < 4; ++r) {
        tl::StepEvent slow;
        slow.step = 31;
        slow.step_seconds = 5.0;
        all.add(Message{make_event(r, 1000.0 + r, slow)});
      }
      for (int r = 0; r < 4; ++r) QVERIFY(!all.straggler(r));
    }

    // 1.4x is within tolerance.
    m = model_of(run(30, 1, 1.4));
    QVERIFY(!m.straggler(1));

    // One rank alone has nobody to straggle behind.
    RunModel single;
    for (int i = 1; i <= 10; ++i)
      single.add(make_event(0, kT0 + i, step(i, 1, i == 10 ? 0.5 : 0.1)));
    QVERIFY(!single.straggler(0));
  }

  void silentRanks() {
    RunModel m;
    for (int r = 0; r < 3; ++r) m.add(hello(r));
    m.add(make_event(0, kT0, tl::HeartbeatEvent{}));
    m.add(make_event(1, kT0 + 3, step(1, 1, 0.1)));  // any event counts as a sign of life
    m.add(make_event(2, kT0, tl::HeartbeatEvent{}));
    m.add(make_event(2, kT0 + 0.5, tl::JobStateEvent{tl::JobState::finished, ""}));
    QVERIFY(!m.silent(0, kT0 + 4.9));
    QVERIFY(m.silent(0, kT0 + 5.5));
    QVERIFY(!m.silent(1, kT0 + 5.5));
    QVERIFY(m.silent(1, kT0 + 8.5));
    QVERIFY(!m.silent(2, kT0 + 100));  // finished ranks are quiet, not silent
    QVERIFY(!m.silent(9, kT0 + 100));
    m.add(make_event(0, kT0 + 5.2, tl::HeartbeatEvent{}));
    QVERIFY(!m.silent(0, kT0 + 5.5));
  }

  void silentUsesTheReceiversClock() {
    // A sender whose clock is an hour behind is not silent when its events keep arriving.
    RunModel m;
    m.add(hello(0), kT0 + 3600);
    m.add(make_event(0, kT0, tl::HeartbeatEvent{}), kT0 + 3600);
    QVERIFY(!m.silent(0, kT0 + 3601));
    QVERIFY(m.silent(0, kT0 + 3606));
    // Without a receive time (a replay) the events' own times count.
    RunModel replay;
    replay.add(make_event(0, kT0, tl::HeartbeatEvent{}));
    QVERIFY(replay.silent(0, kT0 + 3601));
  }

  void allDone() {
    RunModel m;
    QVERIFY(!m.all_done());
    for (int r = 0; r < 3; ++r) m.add(hello(r));
    QVERIFY(!m.all_done());
    m.add(make_event(0, kT0, tl::JobStateEvent{tl::JobState::finished, ""}));
    m.add(make_event(1, kT0, tl::JobStateEvent{tl::JobState::failed, "nccl timeout"}));
    QVERIFY(!m.all_done());
    m.add(make_event(2, kT0, tl::JobStateEvent{tl::JobState::running, ""}));
    QVERIFY(!m.all_done());
    m.add(make_event(2, kT0 + 1, tl::JobStateEvent{tl::JobState::finished, ""}));
    QVERIFY(!m.all_done());  // the HELLOs announce a world of 4: rank 3 has not come yet
    m.add(hello(3));
    m.add(make_event(3, kT0 + 2, tl::JobStateEvent{tl::JobState::finished, ""}));
    QVERIFY(m.all_done());
  }

  // The collector's word that a rank's connection ended (a JOB_STATE failed with seq
  // kCollectorSeq): failed with the reason at once, not over what the rank reported itself, and
  // undone by the rank's next HELLO (its publisher reconnected).
  void lostConnection() {
    auto lost = [](int rank, double time, const std::string& reason) {
      tl::Event e;
      e.rank = rank;
      e.seq = kCollectorSeq;
      e.time = time;
      e.payload = tl::JobStateEvent{tl::JobState::failed, reason};
      return e;
    };
    const std::string why = "connection closed before the rank finished (killed or crashed?)";
    RunModel m;
    for (int r = 0; r < 4; ++r) m.add(hello(r), kT0);
    for (int r = 0; r < 4; ++r) m.add(make_event(r, kT0 + 1, step(1, 2.0, 0.1)), kT0 + 1);
    m.add(make_event(0, kT0 + 2, tl::JobStateEvent{tl::JobState::finished, ""}), kT0 + 2);
    m.add(make_event(1, kT0 + 2, tl::JobStateEvent{tl::JobState::failed, "out of memory"}),
          kT0 + 2);
    const uint64_t events = m.events();
    for (int r = 0; r < 3; ++r) m.add(lost(r, kT0 + 3, why), kT0 + 3);
    QCOMPARE(m.events(), events);  // not an event a rank sent
    const auto& ranks = m.ranks();
    QCOMPARE(ranks.at(0).state, tl::JobState::finished);  // what it reported stands
    QVERIFY(ranks.at(0).reason.empty());
    QVERIFY(!ranks.at(0).connection_lost);
    QCOMPARE(ranks.at(1).state, tl::JobState::failed);
    QCOMPARE(ranks.at(1).reason, std::string("out of memory"));
    QVERIFY(!ranks.at(1).connection_lost);
    QCOMPARE(ranks.at(2).state, tl::JobState::failed);
    QCOMPARE(ranks.at(2).reason, why);
    QVERIFY(ranks.at(2).connection_lost);
    QCOMPARE(ranks.at(2).last_seen, kT0 + 1);  // not heard from at kT0 + 3
    QCOMPARE(ranks.at(2).step, int64_t{1});
    QVERIFY(!m.silent(2, kT0 + 60));  // failed, not silent
    const std::string table = m.table(kT0 + 4);
    QVERIFY2(table.find("FAILED: " + why) != std::string::npos, table.c_str());
    QVERIFY(!m.all_done());  // rank 3 is still running
    m.add(make_event(3, kT0 + 3, tl::JobStateEvent{tl::JobState::finished, ""}), kT0 + 3);
    QVERIFY(m.all_done());

    // Rank 2 reconnects: running again (the state it had), reason gone, live from the HELLO.
    m.add(hello(2), kT0 + 10);
    QCOMPARE(ranks.at(2).state, tl::JobState::running);
    QVERIFY(ranks.at(2).reason.empty());
    QVERIFY(!ranks.at(2).connection_lost);
    QVERIFY(!m.silent(2, kT0 + 12));
    QVERIFY(!m.all_done());
    m.add(make_event(2, kT0 + 11, step(2, 1.5, 0.1)), kT0 + 11);
    QCOMPARE(ranks.at(2).step, int64_t{2});
    // A rank lost before its first step goes back to starting.
    RunModel early;
    early.add(hello(3));
    early.add(lost(3, kT0, why));
    QCOMPARE(early.ranks().at(3).state, tl::JobState::failed);
    early.add(hello(3));
    QCOMPARE(early.ranks().at(3).state, tl::JobState::starting);
    // A failure the rank reports itself after a lost connection replaces the collector's.
    early.add(lost(3, kT0 + 1, why));
    early.add(make_event(3, kT0 + 2, tl::JobStateEvent{tl::JobState::failed, "nccl timeout"}));
    QCOMPARE(early.ranks().at(3).reason, std::string("nccl timeout"));
    QVERIFY(!early.ranks().at(3).connection_lost);
    early.add(hello(3));  // a HELLO does not undo a reported failure
    QCOMPARE(early.ranks().at(3).state, tl::JobState::failed);
    Hello rerun = hello(3);  // ... but another process for the rank starts it afresh
    rerun.pid = 999;
    early.add(rerun);
    QCOMPARE(early.ranks().at(3).state, tl::JobState::starting);
    QVERIFY(early.ranks().at(3).reason.empty());
  }

  void table() {
    auto msgs = run(10, 1, 3.0);
    tl::MemoryEvent mem;
    mem.current = {3 << 20, 1 << 20, 0, 0, 0};
    msgs.emplace_back(make_event(0, kT0 + 1, mem));
    mem.current = {1536, 512, 0, 0, 0};
    msgs.emplace_back(make_event(2, kT0 + 1, mem));
    msgs.emplace_back(
        make_event(3, kT0 + 1, tl::JobStateEvent{tl::JobState::failed, "out of memory"}));
    const RunModel m = model_of(msgs);
    // Rank 0 and 2 last heard at kT0 + 1, rank 1 at kT0 + 1 (its last step): all silent at +10.
    const std::string t = m.table(kT0 + 10);
    QStringList lines = QString::fromStdString(t).split('\n', Qt::SkipEmptyParts);
    QCOMPARE(lines.size(), 5);
    const QString header = lines[0];
    QVERIFY(header.contains("RANK"));
    QVERIFY(header.contains("STATE"));
    QVERIFY(header.contains("MEMORY"));
    QVERIFY(header.contains("FLAGS"));
    const auto state_col = header.indexOf("STATE");
    const auto flags_col = header.indexOf("FLAGS");
    for (int r = 0; r < 4; ++r) {
      const QString& line = lines[r + 1];
      QVERIFY2(line.trimmed().startsWith(QString::number(r)), qPrintable(line));
      QVERIFY2(line.contains(QString("pp%1 tp%2 dp0").arg(r / 2).arg(r % 2)), qPrintable(line));
      // Fixed width: every row's state sits under STATE.
      QVERIFY2(line.mid(state_col).startsWith(r == 3 ? "failed" : "running"), qPrintable(line));
    }
    QVERIFY(lines[1].contains("4.0 MiB"));
    QVERIFY(lines[3].contains("2.0 KiB"));
    for (int r = 1; r <= 4; ++r) QVERIFY(!lines[r].contains("STRAGGLER"));  // nobody waited
    QVERIFY(lines[1].mid(flags_col).contains("SILENT"));
    QVERIFY(lines[4].contains("FAILED: out of memory"));
    QVERIFY(!lines[4].contains("SILENT"));

    // Shortly after the last events nobody is silent.
    const std::string fresh = m.table(kT0 + 2);
    QVERIFY(!QString::fromStdString(fresh).contains("SILENT"));
  }

  void evalsCommAndTimeline() {
    RunModel m;
    for (int r = 0; r < 2; ++r) m.add(hello(r));
    for (int r = 0; r < 2; ++r) {
      m.add(make_event(r, kT0 + 0.2, tl::PhaseEvent{0, 0, tl::Phase::forward, kT0, kT0 + 0.2}));
      m.add(make_event(
          r, kT0 + 0.5,
          tl::CollectiveEvent{"all_reduce", "dp[0]", 4096, kT0 + 0.25, 0.25, 1, 2, 1, r == 1}));
      m.add(make_event(r, kT0 + 1, step(1, 2.0, 1.0)));
      m.add(make_event(
          r, kT0 + 1.5,
          tl::CollectiveEvent{"all_gather", "tp[0]", 1024, kT0 + 1, 0.5, 1, 4, 2, true}));
    }
    QVERIFY(!QString::fromStdString(m.table(kT0 + 2)).contains("eval"));  // none yet
    m.add(make_event(0, kT0 + 2, tl::EvalEvent{1, 1.5, 0.25, 512}));
    m.add(make_event(1, kT0 + 2, tl::EvalEvent{1, 1.5, 0.25, 512}));
    m.add(make_event(0, kT0 + 3, tl::EvalEvent{2, 1.25, 0.875, 512}));

    const auto& e0 = m.ranks().at(0).evals;
    QCOMPARE(e0.size(), size_t{2});
    QCOMPARE(e0[0].step, int64_t{1});
    QCOMPARE(e0[1].loss, 1.25);
    QCOMPARE(e0[1].accuracy, 0.875);
    QCOMPARE(e0[1].samples, int64_t{512});
    QCOMPARE(m.ranks().at(1).evals.size(), size_t{1});

    // The communication view: step 1 holds the all_reduce, step 2 the all_gather.
    const CommStats& c = m.comm();
    QCOMPARE(c.ranks(), 2);
    QCOMPARE(c.last_step(), int64_t{2});
    QCOMPARE(c.step_seconds(0, 1), 0.25);
    QCOMPARE(c.step_seconds(1, 2), 0.5);
    QCOMPARE(c.by_key().at(CommKey{"all_reduce", "dp[0]"}).count, int64_t{2});
    QCOMPARE(c.by_key().at(CommKey{"all_reduce", "dp[0]"}).failed, int64_t{1});
    QCOMPARE(c.by_group_kind().at("tp").bytes, int64_t{2048});
    QCOMPARE(c.last_group(), std::string("tp[0]"));
    QCOMPARE(c.last_end(), kT0 + 1.5);

    // The timeline: forward, all_reduce, all_gather per rank, and the step mark.
    const Timeline& t = m.timeline();
    QCOMPARE(t.ranks(), 2);
    for (int r = 0; r < 2; ++r) {
      const auto& sp = t.spans(r);
      QCOMPARE(sp.size(), size_t{3});
      QCOMPARE(sp[0].kind, SpanKind::forward);
      QCOMPARE(sp[1].kind, SpanKind::collective);
      QCOMPARE(t.labels()[sp[1].label], std::string("all_reduce dp[0]"));
      QCOMPARE(sp[1].ok, r == 1);
      QCOMPARE(t.labels()[sp[2].label], std::string("all_gather tp[0]"));
      QCOMPARE(t.steps(r).size(), size_t{1});
      QCOMPARE(t.steps(r)[0].start, kT0);
      // Epoch times carry ~1e-7 s of rounding.
      QVERIFY(std::abs(t.busy_seconds(r, kT0, kT0 + 2) - (0.2 + 0.25 + 0.5)) < 1e-6);
    }

    // The table: one line under the rows with the newest evaluation.
    const QStringList lines =
        QString::fromStdString(m.table(kT0 + 3)).split('\n', Qt::SkipEmptyParts);
    QCOMPARE(lines.size(), 1 + 2 + 1);
    QCOMPARE(lines.back(), QString("eval at step 2: loss 1.25, accuracy 87.5% (512 samples)"));
  }

  void chromeTrace() {
    const auto msgs = trace_messages();
    std::ostringstream out;
    write_chrome_trace(msgs, out);
    json doc;
    try {
      doc = json::parse(out.str());
    } catch (const std::exception& e) {
      QFAIL(e.what());
    }
    QCOMPARE(doc.at("displayTimeUnit").get<std::string>(), std::string("ms"));
    const json& evs = doc.at("traceEvents");
    QVERIFY(evs.is_array());

    std::map<int, int> process_names;
    std::map<std::pair<int, int>, std::string> thread_names;  // (pid, tid) -> name
    for (const auto& e : evs) {
      if (e.at("ph") != "M") continue;
      if (e.at("name") == "process_name") {
        const int pid = e.at("pid").get<int>();
        ++process_names[pid];
        const std::string want = "rank " + std::to_string(pid) + " (pp " + std::to_string(pid / 2) +
                                 ", tp " + std::to_string(pid % 2) + ", dp 0)";
        QCOMPARE(e.at("args").at("name").get<std::string>(), want);
      }
      if (e.at("name") == "thread_name")
        thread_names[{e.at("pid").get<int>(), e.at("tid").get<int>()}] =
            e.at("args").at("name").get<std::string>();
    }
    QCOMPARE(process_names.size(), size_t{4});
    for (const auto& [pid, n] : process_names) QCOMPARE(n, 1);

    // The earliest time in the messages: rank 0's first forward starts at kT0 + 1 - 0.9.
    const double t0 = kT0 + 0.1;
    int collectives = 0, phases = 0, steps = 0;
    for (const auto& e : evs) {
      const std::string ph = e.at("ph");
      if (ph == "M") continue;
      const int pid = e.at("pid").get<int>();
      QVERIFY(pid >= 0 && pid < 4);
      QVERIFY(e.at("ts").get<double>() >= 0);
      if (ph == "X") {
        QVERIFY(e.at("dur").get<double>() >= 0);
        const std::string thread = thread_names.at({pid, e.at("tid").get<int>()});
        const std::string name = e.at("name");
        if (name == "all_reduce") {
          ++collectives;
          QCOMPARE(thread, std::string("collectives"));
          QCOMPARE(e.at("args").at("group").get<std::string>(),
                   "tp[" + std::to_string(pid / 2) + "]");
          QCOMPARE(e.at("args").at("bytes").get<int64_t>(), int64_t{4096} * (pid + 1));
          QCOMPARE(e.at("args").at("busbw").get<double>(), 20.5);
          QVERIFY(std::abs(e.at("dur").get<double>() - 0.05e6) < 1e-3);
        } else {
          ++phases;
          QCOMPARE(thread, std::string("pipeline"));
          QVERIFY2((name[0] == 'F' || name[0] == 'B') && name.size() == 2, name.c_str());
          QCOMPARE(e.at("args").at("stage").get<int>(), pid / 2);
          // F<i> runs from kT0 + i - 0.9: check the timestamp against the earliest time.
          const int i = name[1] - '0';
          const double start = kT0 + i - (name[0] == 'F' ? 0.9 : 0.6);
          QVERIFY2(std::abs(e.at("ts").get<double>() - (start - t0) * 1e6) < 1.0,
                   qPrintable(QString::number(e.at("ts").get<double>())));
        }
      } else if (ph == "i") {
        ++steps;
        QCOMPARE(thread_names.at({pid, e.at("tid").get<int>()}), std::string("steps"));
        QVERIFY(e.at("name").get<std::string>().starts_with("step "));
        QVERIFY(e.at("args").contains("loss"));
        QVERIFY(e.at("args").contains("lr"));
      }
    }
    QCOMPARE(collectives, 12);
    QCOMPARE(phases, 24);
    QCOMPARE(steps, 12);

    // No messages: still a valid, empty trace.
    std::ostringstream empty;
    write_chrome_trace({}, empty);
    const json e = json::parse(empty.str());
    QVERIFY(e.at("traceEvents").empty());
  }

  void stepCsv() {
    auto msgs = trace_messages();
    std::ostringstream out;
    write_step_csv(msgs, out);
    std::istringstream in(out.str());
    std::string line;
    QVERIFY(std::getline(in, line));
    QCOMPARE(line, std::string("rank,step,loss,lr,grad_norm,throughput,step_seconds,time,"
                               "compute_s,wait_s,transfer_s,host"));
    std::vector<std::vector<std::string>> rows;
    while (std::getline(in, line)) {
      const std::vector<std::string> cells = csv_cells(line);
      QCOMPARE(cells.size(), size_t{12});
      rows.push_back(cells);
    }
    QCOMPARE(rows.size(), size_t{12});
    // Rows follow message order: step i of rank r is row (i-1)*4 + r.
    for (int i = 1; i <= 3; ++i)
      for (int r = 0; r < 4; ++r) {
        const auto& row = rows[static_cast<size_t>((i - 1) * 4 + r)];
        QCOMPARE(std::stoi(row[0]), r);
        QCOMPARE(std::stoll(row[1]), int64_t{i});
        QCOMPARE(std::stod(row[2]), 1.0 / (3 * i + r));  // exact: the text round-trips
        QCOMPARE(std::stod(row[7]), kT0 + i);
        // Each step: forward 0.3 s and backward 0.15 s of compute; its one all_reduce has no
        // known wait, so it is neither wait nor transfer.
        QVERIFY(std::abs(std::stod(row[8]) - 0.45) < 1e-6);
        QCOMPARE(std::stod(row[9]), 0.0);
        QCOMPARE(std::stod(row[10]), 0.0);
      }
  }

  // Known waits: the trace draws each as its own "wait" slice ahead of the op's transfer slice,
  // and the CSV's compute_s, wait_s and transfer_s are each step's sums of the events fed here.
  void waitsInTraceAndCsv() {
    struct Sums {
      double compute = 0, wait = 0, transfer = 0;
    };
    struct Coll {
      int rank;
      std::string op, group;
      double start, duration, wait;
    };
    std::map<std::pair<int, int64_t>, Sums> want;
    std::vector<Coll> colls;
    std::vector<Message> msgs;
    for (int r = 0; r < 3; ++r) {
      Hello h = hello(r);
      h.world = 3;
      h.pp = 1;
      h.tp = 1;
      h.dp = 3;
      h.pp_i = 0;
      h.tp_i = 0;
      h.dp_i = r;
      msgs.emplace_back(h);
    }
    for (int64_t i = 1; i <= 3; ++i)
      for (int r = 0; r < 3; ++r) {
        const double t = kT0 + static_cast<double>(i);
        Sums& sum = want[{r, i}];
        // Rank 2 computes longest: ranks 0 and 1 wait for it in the all_reduce.
        const double fwd = 0.1 + 0.05 * r, bwd = 2 * fwd;
        msgs.emplace_back(make_event(r, t, tl::PhaseEvent{0, 0, tl::Phase::forward, t, t + fwd}));
        msgs.emplace_back(
            make_event(r, t, tl::PhaseEvent{0, 0, tl::Phase::backward, t + fwd, t + fwd + bwd}));
        sum.compute += fwd + bwd;
        auto collective = [&](const std::string& op, const std::string& group, double start,
                              double duration, double wait, int last) {
          tl::CollectiveEvent c;
          c.op = op;
          c.group = group;
          c.start = start;
          c.duration = duration;
          c.wait = wait;
          c.last_rank = last;
          msgs.emplace_back(make_event(r, start + duration, c));
          colls.push_back({r, op, group, start, duration, wait});
          if (wait >= 0) {
            sum.wait += std::min(wait, duration);
            sum.transfer += duration - std::min(wait, duration);
          }
        };
        const double arrive = t + fwd + bwd, last_arrives = t + 0.2 + 0.4;  // rank 2's
        collective("all_reduce", "dp[0]", arrive, last_arrives - arrive + 0.02,
                   last_arrives - arrive, 2);
        collective("send", "world", last_arrives + 0.05, 0.01, -1, -1);  // unknown: one slice
        if (r == 1) collective("recv", "world", last_arrives + 0.05, 0.03, 0.025, 0);
        msgs.emplace_back(
            make_event(r, t, tl::PhaseEvent{0, -1, tl::Phase::optimizer, t + 0.7, t + 0.725}));
        sum.compute += 0.025;
        msgs.emplace_back(make_event(r, t + 0.8, step(i, 1.0, 0.8)));
      }

    // CSV: one row per step, the three new columns last (epoch-second spans carry ~1e-7 s of
    // rounding).
    std::ostringstream csv;
    write_step_csv(msgs, csv);
    std::istringstream in(csv.str());
    std::string line;
    QVERIFY(std::getline(in, line));
    QVERIFY(line.ends_with(",time,compute_s,wait_s,transfer_s,host"));
    int rows = 0;
    while (std::getline(in, line)) {
      const std::vector<std::string> cells = csv_cells(line);
      QCOMPARE(cells.size(), size_t{12});
      const Sums& w = want.at({std::stoi(cells[0]), std::stoll(cells[1])});
      QVERIFY2(std::abs(std::stod(cells[8]) - w.compute) < 1e-6, line.c_str());
      QVERIFY2(std::abs(std::stod(cells[9]) - w.wait) < 1e-6, line.c_str());
      QVERIFY2(std::abs(std::stod(cells[10]) - w.transfer) < 1e-6, line.c_str());
      ++rows;
    }
    QCOMPARE(rows, 9);
    QVERIFY(want.at({0, 2}).wait > 0.2);  // the test means something: rank 0 waited
    QVERIFY(want.at({2, 2}).wait == 0.0);

    // Trace: every collective's slices, matched by (pid, op) in order.
    std::ostringstream out;
    write_chrome_trace(msgs, out);
    const json doc = json::parse(out.str());
    double t0 = std::numeric_limits<double>::infinity();
    for (const auto& m : msgs)
      if (const auto* e = std::get_if<tl::Event>(&m)) {
        t0 = std::min(t0, e->time);
        if (const auto* p = std::get_if<tl::PhaseEvent>(&e->payload)) t0 = std::min(t0, p->start);
        if (const auto* c = std::get_if<tl::CollectiveEvent>(&e->payload))
          t0 = std::min(t0, c->start);
      }
    std::map<std::pair<int, std::string>, std::vector<json>> slices;  // (pid, name) -> in order
    std::map<int, double> wait_us;                                    // per pid
    for (const auto& e : doc.at("traceEvents")) {
      if (e.at("ph") != "X" || e.at("tid").get<int>() != 2) continue;  // the collectives thread
      slices[{e.at("pid").get<int>(), e.at("name").get<std::string>()}].push_back(e);
      if (e.value("cat", "") == "wait")
        wait_us[e.at("pid").get<int>()] += e.at("dur").get<double>();
    }
    std::map<std::pair<int, std::string>, size_t> next;
    int wait_slices = 0;
    for (const Coll& c : colls) {
      const auto& ops = slices[{c.rank, c.op}];
      const size_t k = next[{c.rank, c.op}]++;
      QVERIFY(k < ops.size());
      const json& op = ops[k];
      QCOMPARE(op.at("cat").get<std::string>(), std::string("collective"));
      const double w = c.wait > 0 ? c.wait : 0.0;
      QVERIFY(std::abs(op.at("ts").get<double>() - (c.start + w - t0) * 1e6) < 1.0);
      QVERIFY(std::abs(op.at("dur").get<double>() - (c.duration - w) * 1e6) < 1e-3);
      if (c.wait < 0) {
        QVERIFY(!op.at("args").contains("wait_s"));
        continue;
      }
      QVERIFY(std::abs(op.at("args").at("wait_s").get<double>() - c.wait) < 1e-12);
      if (c.wait == 0) continue;
      const std::string name = "wait (" + c.op + " " + c.group + ")";
      const auto& waits = slices[{c.rank, name}];
      const size_t j = next[{c.rank, name}]++;
      QVERIFY2(j < waits.size(), name.c_str());
      const json& ws = waits[j];
      ++wait_slices;
      QCOMPARE(ws.at("cat").get<std::string>(), std::string("wait"));
      QVERIFY(std::abs(ws.at("ts").get<double>() - (c.start - t0) * 1e6) < 1.0);
      QVERIFY(std::abs(ws.at("dur").get<double>() - c.wait * 1e6) < 1e-3);
      // The wait ends where the op's transfer slice begins.
      QVERIFY(std::abs(ws.at("ts").get<double>() + ws.at("dur").get<double>() -
                       op.at("ts").get<double>()) < 1.0);
    }
    // Ranks 0 and 1 wait in every all_reduce, rank 1 also in each recv; rank 2 never.
    QCOMPARE(wait_slices, 3 * 2 + 3);
    QCOMPARE(wait_us.count(2), size_t{0});
    for (int r = 0; r < 3; ++r) {
      double sum = 0;
      for (int64_t i = 1; i <= 3; ++i) sum += want.at({r, i}).wait;
      QVERIFY2(std::abs(wait_us[r] - sum * 1e6) < 1e-2, qPrintable(QString::number(r)));
    }
    // Every slice of the collectives thread was matched: no stray ones.
    for (const auto& [key, list] : slices) QCOMPARE(next[key], list.size());
  }
};

QTEST_GUILESS_MAIN(TestRunModel)
#include "tst_run_model.moc"
