// TimeAccounting (net/time_accounting.h) and what RunModel makes of it: each rank's compute, busy,
// wait, transfer and unknown seconds for one step and over its window (warm-up steps left out,
// kWindowSlots slots of at least kSlotSeconds, older ones dropping out), the straggler rules (peer
// wait share, dominance over the next rank, own time against every peer's, enough steps and
// seconds, only collectives inside a pipeline stage), the pipeline stage rules (ratio and
// margin, at their boundaries; against the layout baseline, the first judged window: a stage
// that became slow is the bottleneck, one costlier from the start an uneven layout), open steps,
// ranks with different step counts, and the table's COMP% / WAIT% columns, STRAGGLER flag and
// diagnosis lines.
//
// Events are built by hand the way a rank publishes them (PHASE spans, COLLECTIVEs with wait and
// last rank, then STEP). Every expected figure is worked out here from the plan that made the
// events; boundary cases use dyadic seconds (exact in binary) on an integer epoch so that "exactly
// 10%" or "exactly 1.25x" is exact in the arithmetic too.
#include <QtTest>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "net/run_model.h"
#include "net/time_accounting.h"
#include "tests/common/telemetry_events.h"
#include "tests/common/text.h"

using namespace shardlab;
using namespace shardlab::net;
namespace tl = shardlab::telemetry;

namespace {

using test::make_event;

constexpr double kT0 = 1.7e9;     // an integer: dyadic offsets from it are exact
constexpr double kStride = 10.0;  // seconds between the starts of two steps
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
// Phase spans are differences of epoch times (ulp 2^-22 s near kT0): sums over a window of steps
// are good to some tens of microseconds.
constexpr double kTolerance = 1e-4;
// The first step that is accounted (the ones before are warm-up).
constexpr int64_t kFirst = kWarmUpSteps + 1;

// One communication operation as the rank reports it.
struct Coll {
  std::string op = "all_reduce";
  std::string group = "dp[0]";
  double duration = 0;
  double wait = -1;
  int last_rank = -1;
};

// One step of one rank: forward and backward spans, the collectives after them, the optimizer
// span, then the STEP with `seconds`.
struct StepPlan {
  int stage = 0;
  double fwd = 0, bwd = 0, opt = 0;
  std::vector<Coll> colls;
  double seconds = 1.0;
};

using Plan = std::function<StepPlan(int rank, int64_t step)>;

tl::CollectiveEvent collective(const Coll& c, double start, uint64_t seq) {
  tl::CollectiveEvent e;
  e.op = c.op;
  e.group = c.group;
  e.bytes = 1 << 20;
  e.start = start;
  e.duration = c.duration;
  // Bandwidths as a real collective reports them (bytes over its whole duration, waiting
  // included), so the run model's TransferWatch sees the same link speed however long a rank is
  // waited for: a constant figure would make a long wait look like a fast link.
  e.algbw = c.duration > 0 ? static_cast<double>(e.bytes) / 1e9 / c.duration : 0;
  e.busbw = e.algbw;
  e.seq = seq;
  e.ok = true;
  e.wait = c.wait;
  e.last_rank = c.last_rank;
  return e;
}

tl::Event phase_event(int rank, int stage, tl::Phase phase, double start, double end) {
  return make_event(
      rank, end, tl::PhaseEvent{stage, phase == tl::Phase::optimizer ? -1 : 0, phase, start, end});
}

tl::Event step_event(int rank, int64_t n, double time, double seconds) {
  tl::StepEvent s;
  s.step = n;
  s.loss = 1.0 / static_cast<double>(n);
  s.lr = 0.01;
  s.throughput = 1000;
  s.step_seconds = seconds;
  return make_event(rank, time, s);
}

// The events `rank` publishes for step n, in its order.
std::vector<tl::Event> step_events(int rank, int64_t n, const StepPlan& p) {
  std::vector<tl::Event> out;
  const double t = kT0 + static_cast<double>(n) * kStride;
  out.push_back(phase_event(rank, p.stage, tl::Phase::forward, t, t + p.fwd));
  out.push_back(phase_event(rank, p.stage, tl::Phase::backward, t + p.fwd, t + p.fwd + p.bwd));
  double at = t + p.fwd + p.bwd;
  uint64_t seq = static_cast<uint64_t>(n) * 100;
  for (const Coll& c : p.colls) {
    const double d = std::isfinite(c.duration) && c.duration > 0 ? c.duration : 0.0;
    out.push_back(make_event(rank, at + d, collective(c, at, seq++)));
    at += d;
  }
  out.push_back(phase_event(rank, p.stage, tl::Phase::optimizer, at, at + p.opt));
  out.push_back(step_event(rank, n, t + (std::isfinite(p.seconds) ? p.seconds : 1.0), p.seconds));
  return out;
}

// Step-major, as a collector sees a synchronous job: every rank's step 1, then step 2, ... A rank
// with fewer steps (steps[rank]) stops early.
std::vector<tl::Event> run_events(const std::vector<int64_t>& steps, const Plan& plan) {
  std::vector<tl::Event> out;
  const int64_t most = steps.empty() ? 0 : *std::max_element(steps.begin(), steps.end());
  for (int64_t n = 1; n <= most; ++n)
    for (int r = 0; r < static_cast<int>(steps.size()); ++r)
      if (n <= steps[static_cast<size_t>(r)])
        for (tl::Event& e : step_events(r, n, plan(r, n))) out.push_back(std::move(e));
  return out;
}

std::vector<tl::Event> run_events(int ranks, int64_t steps, const Plan& plan) {
  return run_events(std::vector<int64_t>(static_cast<size_t>(ranks), steps), plan);
}

// The HELLOs of a pp x dp job (tp 1): rank = pp_i * dp + dp_i.
std::vector<Hello> hellos(int pp, int dp) {
  std::vector<Hello> out;
  for (int pp_i = 0; pp_i < pp; ++pp_i)
    for (int dp_i = 0; dp_i < dp; ++dp_i) {
      Hello h;
      h.job_id = "job";
      h.rank = pp_i * dp + dp_i;
      h.world = pp * dp;
      h.pp = pp;
      h.tp = 1;
      h.dp = dp;
      h.pp_i = pp_i;
      h.tp_i = 0;
      h.dp_i = dp_i;
      h.host = "node";
      h.pid = 100 + h.rank;
      out.push_back(h);
    }
  return out;
}

std::string coords_of(int pp_i, int tp_i, int dp_i) {
  return "pp" + std::to_string(pp_i) + " tp" + std::to_string(tp_i) + " dp" + std::to_string(dp_i);
}

std::map<int, RankPlace> places_of(const std::vector<Hello>& hs) {
  std::map<int, RankPlace> out;
  for (const Hello& h : hs)
    out[h.rank] = RankPlace{h.pp_i, h.pp, coords_of(h.pp_i, h.tp_i, h.dp_i)};
  return out;
}

void feed(RunModel& m, const std::vector<Hello>& hs, const std::vector<tl::Event>& events) {
  for (const Hello& h : hs) m.add(Message{h});
  test::EventFeeder feeder(m);
  for (const tl::Event& e : events) feeder.add(e.rank, e.time, e.payload);
}

TimeAccounting account(const std::vector<tl::Event>& events, int pp = 1) {
  TimeAccounting t;
  for (const tl::Event& e : events) t.add(e, pp);
  return t;
}

// The time the tables are printed at: shortly after step n's events (nobody silent).
double table_time(int64_t n) {
  return kT0 + static_cast<double>(n) * kStride + 2.0;
}

// The steps a window holds after a rank reported steps 1..`reported`, each of `seconds`: the
// warm-up left out, then slots of as many steps as it takes to reach kSlotSeconds, the newest
// kWindowSlots full slots kept and the one still filling.
int64_t window_steps(int64_t reported, double seconds) {
  const int64_t accounted = std::max<int64_t>(0, reported - kWarmUpSteps);
  int64_t per_slot = 1;
  while (static_cast<double>(per_slot) * seconds < kSlotSeconds) ++per_slot;
  const int64_t full = accounted / per_slot;
  const int64_t filling = accounted % per_slot;
  return std::min(full, static_cast<int64_t>(kWindowSlots)) * per_slot + filling;
}

bool near(double a, double b, double tolerance = kTolerance) {
  return std::abs(a - b) <= tolerance;
}

#define COMPARE_NEAR(actual, expected)                                               \
  do {                                                                               \
    const double actual_ = (actual);                                                 \
    const double expected_ = (expected);                                             \
    QVERIFY2(near(actual_, expected_), qPrintable(QString("%1 is %2, expected %3")   \
                                                      .arg(#actual)                  \
                                                      .arg(actual_, 0, 'g', 17)      \
                                                      .arg(expected_, 0, 'g', 17))); \
  } while (false)

double waited_on(const StepAccount& a, int rank) {
  double s = 0;
  for (const auto& [r, seconds] : a.waited_on)
    if (r == rank) s += seconds;
  return s;
}

// The expected account, field by field.
struct Sums {
  int64_t step = 0, steps = 0;
  double seconds = 0, compute = 0, busy = 0, wait = 0, transfer = 0, unknown = 0;
  int64_t collectives = 0, last = 0;
  double stage_wait = 0;
  std::map<int, double> waited_on;
};

void check_account(const StepAccount& a, const Sums& e) {
  QCOMPARE(a.step, e.step);
  QCOMPARE(a.steps, e.steps);
  COMPARE_NEAR(a.seconds, e.seconds);
  COMPARE_NEAR(a.compute, e.compute);
  COMPARE_NEAR(a.busy, e.busy);
  COMPARE_NEAR(a.wait, e.wait);
  COMPARE_NEAR(a.transfer, e.transfer);
  COMPARE_NEAR(a.unknown, e.unknown);
  QCOMPARE(a.collectives, e.collectives);
  QCOMPARE(a.last, e.last);
  COMPARE_NEAR(a.stage_wait, e.stage_wait);
  size_t named = 0;
  for (const auto& [r, s] : e.waited_on)
    if (s > 0) {
      ++named;
      COMPARE_NEAR(waited_on(a, r), s);
    }
  QCOMPARE(a.waited_on.size(), named);
}

// What the diagnosis should say about a straggler.
struct ExpectedStraggler {
  int rank = -1;
  std::string coords;
  double peer_wait_share = 0, blame_share = 0, last_share = 0;
  int64_t steps = 0;

  std::string text() const {
    return fmt::format(
        "rank {}{} is slow: its peers waited {:.0f}% of their step time for it, {:.0f}% of all "
        "their waiting (last {} steps; it arrived last at {:.0f}% of its collectives)",
        rank, coords.empty() ? std::string() : " (" + coords + ")", 100 * peer_wait_share,
        100 * blame_share, steps, 100 * last_share);
  }
};

// The diagnosis's lines, for a failure message.
const char* text_of(const Diagnosis& d) {
  static std::string text;
  text.clear();
  for (const std::string& line : d.lines()) text += line + '\n';
  return text.c_str();
}

void check_straggler(const Diagnosis& d, const ExpectedStraggler& e) {
  QVERIFY2(d.straggler.has_value(), ("expected: " + e.text()).c_str());
  const Straggler& s = *d.straggler;
  QCOMPARE(s.rank, e.rank);
  COMPARE_NEAR(s.peer_wait_share, e.peer_wait_share);
  COMPARE_NEAR(s.blame_share, e.blame_share);
  COMPARE_NEAR(s.last_share, e.last_share);
  QCOMPARE(s.steps, e.steps);
  // A RunModel's verdict also says since when and how sure (settle(): one check per slot);
  // a TimeAccounting asked directly has no verdict to tell of.
  std::string want = e.text();
  if (s.checks > 0) {
    QVERIFY(s.full_rule >= 1 && s.full_rule <= s.checks && s.named_since >= 1);
    want += fmt::format(
        "; named since step {}, the full rule held at {:.0f}% of the {} checks since",
        s.named_since, 100.0 * static_cast<double>(s.full_rule) / static_cast<double>(s.checks),
        s.checks);
  }
  QCOMPARE(s.text, want);
  const std::vector<std::string> lines = d.lines();
  QVERIFY(std::find(lines.begin(), lines.end(), want) != lines.end());
}

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

// The table row of `rank` ("    2  pp0 tp0 dp2  running ..."); empty when there is none.
std::string row_of(const std::string& table, int rank) {
  std::istringstream in(table);
  std::string line;
  while (std::getline(in, line)) {
    const std::vector<std::string> w = words(line);
    if (w.size() > 4 && w[0] == std::to_string(rank) && w[1].starts_with("pp")) return line;
  }
  return {};
}

// Words of a row: RANK, pp., tp., dp., STATE, STEP, LOSS, MEMORY (number and unit), COMM(s),
// COMP%, WAIT%, LAST(s), FLAGS...
constexpr size_t kCompWord = 10;
constexpr size_t kWaitWord = 11;

std::string percent(double share) {
  return fmt::format("{:.0f}", 100 * share);
}

// 4 data-parallel ranks (group dp[0]); per step three collectives: at A rank 2 arrives last and
// the others wait `a`; at B rank 1 arrives last and the others wait `b`; at C rank 0 arrives last
// and only rank 2 waits, `c`. Every transfer takes 50 ms. Steps of `seconds`, rank 2's of
// `culprit_seconds` (longer where a test wants the own-time rule out of the way).
StepPlan suspects(int r, double a, double b, double c, double seconds, double culprit_seconds) {
  StepPlan p;
  p.fwd = 0.125;
  p.bwd = 0.25;
  p.opt = 0.0625;
  p.seconds = r == 2 ? culprit_seconds : seconds;
  p.colls.push_back({"all_reduce", "dp[0]", (r == 2 ? 0 : a) + 0.05, r == 2 ? 0 : a, 2});
  p.colls.push_back({"all_reduce", "dp[0]", (r == 1 ? 0 : b) + 0.05, r == 1 ? 0 : b, 1});
  p.colls.push_back({"reduce_scatter", "dp[0]", (r == 2 ? c : 0) + 0.05, r == 2 ? c : 0, 0});
  return p;
}

// What suspects() should make the diagnosis say about rank 2, after steps[q] reported steps per
// rank (all of `seconds`, at least kSlotSeconds).
ExpectedStraggler suspects_expected(const std::vector<int64_t>& steps, double a, double b,
                                    double seconds) {
  double blame = 0, peer_wait = 0, peer_seconds = 0;
  for (int q : {0, 1, 3}) {
    const int64_t n = window_steps(steps[static_cast<size_t>(q)], seconds);
    if (n < kMinDiagnosisSteps) continue;
    const auto k = static_cast<double>(n);
    peer_seconds += k * seconds;
    blame += k * a;                             // A: rank 2 last
    peer_wait += k * (a + (q == 1 ? 0.0 : b));  // B: rank 1 last, the others wait b
  }
  ExpectedStraggler e;
  e.rank = 2;
  e.coords = coords_of(0, 0, 2);
  e.peer_wait_share = blame / peer_seconds;
  e.blame_share = std::min(1.0, blame / peer_wait);
  e.last_share = 1.0 / 3.0;  // last at A of A, B, C
  e.steps = window_steps(steps[2], seconds);
  return e;
}

// 4 data-parallel ranks: rank 2 arrives last at the gradient all-reduce every step and the
// others wait 0.4 s of their 1 s step for it; a small all-reduce after it is last on rank n % 4
// with 10 ms waits (the healthy jitter of arrivals).
StepPlan straggler_plan(int r, int64_t n) {
  StepPlan p;
  p.fwd = 0.2;
  p.bwd = 0.3;
  p.opt = 0.05;
  p.seconds = 1.0;
  p.colls.push_back(r == 2 ? Coll{"all_reduce", "dp[0]", 0.05, 0.0, 2}
                           : Coll{"all_reduce", "dp[0]", 0.45, 0.40, 2});
  const int l = static_cast<int>(n % 4);
  p.colls.push_back(r == l ? Coll{"all_reduce", "dp[0]", 0.02, 0.0, l}
                           : Coll{"all_reduce", "dp[0]", 0.03, 0.01, l});
  return p;
}

// pp 2 x dp 2: ranks 0, 1 are stage 0, ranks 2, 3 stage 1. Stage 0 waits for stage 1 at the
// gradients' recv and at the loss all-reduce on "world", where rank 2 arrives last; inside each
// stage the data-parallel all-reduce is last on alternating ranks with 5 ms waits.
StepPlan pipeline_plan(int r, int64_t n) {
  StepPlan p;
  p.stage = r / 2;
  p.opt = 0.05;
  p.seconds = 1.0;
  if (p.stage == 0) {
    p.fwd = 0.25;
    p.bwd = 0.25;
    const int l = static_cast<int>(n % 2);
    p.colls = {
        {"send", "pp[0]", 0.01, -1, -1},
        {"recv", "pp[0]", 0.2, 0.15, r + 2},
        {"all_reduce", "dp[0]", 0.02, r == l ? 0.0 : 0.005, l},
        {"all_reduce", "world", 0.22, 0.2, 2},
    };
  } else {
    p.fwd = 0.275;
    p.bwd = 0.275;
    const int l = 2 + static_cast<int>(n % 2);
    p.colls = {
        {"recv", "pp[0]", 0.1, 0.08, r - 2},
        {"send", "pp[0]", 0.01, -1, -1},
        {"all_reduce", "dp[1]", 0.02, r == l ? 0.0 : 0.005, l},
        {"all_reduce", "world", r == 2 ? 0.05 : 0.06, r == 2 ? 0.0 : 0.01, 2},
    };
  }
  return p;
}

// pp 2 x dp 2 with stage busy seconds busy0 / busy1 (forward and backward half each) in steps of
// `seconds` (1 s: the busy shares), and a 62.5 ms optimizer that is compute but not busy.
StepPlan stages_plan(int r, double busy0, double busy1, double seconds = 1.0) {
  StepPlan p;
  p.stage = r / 2;
  const double busy = p.stage == 0 ? busy0 : busy1;
  p.fwd = busy * 0.5;
  p.bwd = busy * 0.5;
  p.opt = 0.0625;
  p.seconds = seconds;
  if (p.stage == 0)
    p.colls = {{"send", "pp[0]", 0.01, -1, -1}, {"all_reduce", "dp[0]", 0.02, 0.0, r}};
  else
    p.colls = {{"recv", "pp[0]", 0.01, 0.005, r - 2}, {"all_reduce", "dp[1]", 0.02, 0.0, r}};
  return p;
}

// The layout baseline is each rank's first judged window: steps kFirst to kBaselineStep (1 s
// steps, one a slot). A change from step kChangeStep on fills the whole window by kChangedSteps.
constexpr int64_t kBaselineStep = kWarmUpSteps + kMinDiagnosisSteps;
constexpr int64_t kChangeStep = kBaselineStep + 1;
constexpr int64_t kChangedSteps = kBaselineStep + static_cast<int64_t>(kWindowSlots);

// stages_plan with busy seconds base0 / base1 in 1 s steps before kChangeStep, then busy0 / busy1
// in steps of `seconds`.
Plan changing_stages(double base0, double base1, double busy0, double busy1, double seconds) {
  return [=](int r, int64_t n) {
    return n < kChangeStep ? stages_plan(r, base0, base1) : stages_plan(r, busy0, busy1, seconds);
  };
}

// Step n of the window test: slow steps (0.5 + 0.01n s, one a slot) or fast ones (1/64 s, four a
// slot). Rank 0 waits for rank 1 at the all-reduce on odd steps and is itself last on even ones;
// a send's wait is unknown.
StepPlan window_plan(int64_t n, bool fast) {
  const double k = static_cast<double>(n);
  const bool odd = n % 2 == 1;
  StepPlan p;
  if (fast) {
    p.fwd = 0.001;
    p.bwd = 0.002;
    p.opt = 0.0005;
    p.seconds = 1.0 / 64;
    p.colls = {{"all_reduce", "dp[0]", 0.004, odd ? 0.001 : 0.0, odd ? 1 : 0},
               {"send", "pp[0]", 0.001, -1, -1}};
  } else {
    p.fwd = 0.01 * k;
    p.bwd = 0.02 * k;
    p.opt = 0.005;
    p.seconds = 0.5 + 0.01 * k;
    p.colls = {{"all_reduce", "dp[0]", 0.1, odd ? 0.001 * k : 0.0, odd ? 1 : 0},
               {"send", "pp[0]", 0.002 * k, -1, -1}};
  }
  return p;
}

}  // namespace

class TestTimeAccounting : public QObject {
  Q_OBJECT

 private slots:
  // One step with every kind of operation: each part lands in its sum.
  void oneStepAccount() {
    StepPlan p;
    p.fwd = 0.3;
    p.bwd = 0.5;
    p.opt = 0.1;
    p.seconds = 1.5;
    p.colls = {
        {"all_reduce", "dp[0]", 0.2, 0.05, 1},     // waited 50 ms for rank 1
        {"reduce_scatter", "dp[0]", 0.1, 0.3, 1},  // a wait past the duration: clipped
        {"all_reduce", "world", 0.08, 0.0, 0},     // this rank arrived last
        {"send", "pp[0]", 0.04, -1, -1},           // wait unknown
        {"recv", "pp[0]", 0.06, 0.02, 1},          // a wait, but not inside the stage
        {"all_reduce", "tp[0]", 0.07, 0.03, -1},   // a wait, last rank unknown
    };
    const TimeAccounting t = account(step_events(0, 7, p));

    Sums e;
    e.step = 7;
    e.steps = 1;
    e.seconds = 1.5;
    e.compute = 0.3 + 0.5 + 0.1;
    e.busy = 0.3 + 0.5;
    e.wait = 0.05 + 0.1 + 0.0 + 0.02 + 0.03;
    e.transfer = (0.2 - 0.05) + (0.1 - 0.1) + 0.08 + (0.06 - 0.02) + (0.07 - 0.03);
    e.unknown = 0.04;
    e.collectives = 3;  // dp, dp, world (no pipeline)
    e.last = 1;
    e.stage_wait = 0.05 + 0.1 + 0.0;
    e.waited_on[1] = 0.05 + 0.1;
    check_account(t.window(0), e);
    if (QTest::currentTestFailed()) return;

    COMPARE_NEAR(t.window(0).share(t.window(0).compute), (0.3 + 0.5 + 0.1) / 1.5);
    // Nothing open after the STEP, nothing for a rank never heard of.
    const StepAccount* open = t.open(0);
    QVERIFY(open != nullptr);
    QCOMPARE(open->steps, int64_t{0});
    QCOMPARE(open->compute, 0.0);
    QCOMPARE(open->wait + open->transfer + open->unknown, 0.0);
    QVERIFY(t.open(1) == nullptr);
    QCOMPARE(t.window(1).steps, int64_t{0});
    QCOMPARE(t.window(1).seconds, 0.0);
    QCOMPARE(StepAccount{}.share(1.0), 0.0);  // no step time: no share

    // Events that are not accounted leave the sums alone.
    TimeAccounting u = account(step_events(0, 7, p));
    u.add(make_event(0, kT0 + 80, tl::HeartbeatEvent{}), 1);
    u.add(make_event(0, kT0 + 80, tl::LogLineEvent{"hello"}), 1);
    u.add(make_event(0, kT0 + 80, tl::MemoryEvent{}), 1);
    u.add(make_event(0, kT0 + 80, tl::EvalEvent{7, 0.5, 0.9, 100}), 1);
    u.add(make_event(0, kT0 + 80, tl::JobStateEvent{tl::JobState::running, ""}), 1);
    check_account(u.window(0), e);
    QVERIFY(u.open(0) != nullptr);
    QCOMPARE(u.open(0)->compute + u.open(0)->wait + u.open(0)->transfer + u.open(0)->unknown, 0.0);
  }

  // Warm-up steps are not accounted: their events leave no trace in the window, and the open
  // step starts afresh after them.
  void warmUpStepsLeftOut() {
    QCOMPARE(kWarmUpSteps, int64_t{1});
    StepPlan p;
    p.fwd = 0.3;
    p.bwd = 0.5;
    p.opt = 0.1;
    p.seconds = 1.0;
    p.colls = {{"all_reduce", "dp[0]", 0.2, 0.05, 1}};
    TimeAccounting t;
    for (const tl::Event& e : step_events(0, 1, p)) t.add(e, 1);
    QCOMPARE(t.window(0).steps, int64_t{0});
    QCOMPARE(t.window(0).seconds, 0.0);
    QVERIFY(t.open(0) != nullptr);
    QCOMPARE(t.open(0)->compute + t.open(0)->wait + t.open(0)->transfer, 0.0);
    for (const tl::Event& e : step_events(0, 2, p)) t.add(e, 1);
    QCOMPARE(t.window(0).steps, int64_t{1});
    QCOMPARE(t.window(0).step, int64_t{2});
    COMPARE_NEAR(t.window(0).compute, 0.3 + 0.5 + 0.1);
    COMPARE_NEAR(t.window(0).wait, 0.05);

    // In the table: "-" while only the warm-up step is in.
    RunModel m;
    feed(m, hellos(1, 1), step_events(0, 1, p));
    const std::vector<std::string> row = words(row_of(m.table(table_time(1)), 0));
    QVERIFY(row.size() > kWaitWord);
    QCOMPARE(row[kCompWord], std::string("-"));
    QCOMPARE(row[kWaitWord], std::string("-"));
  }

  // One collective of rank 0 in a step of 1 s: how its duration splits and whether it is a
  // collective inside the stage with a known last rank.
  void collectiveAccount_data() {
    QTest::addColumn<QString>("op");
    QTest::addColumn<QString>("group");
    QTest::addColumn<int>("pp");
    QTest::addColumn<double>("duration");
    QTest::addColumn<double>("wait");
    QTest::addColumn<int>("lastRank");
    QTest::addColumn<double>("expWait");
    QTest::addColumn<double>("expTransfer");
    QTest::addColumn<double>("expUnknown");
    QTest::addColumn<int>("expCollectives");
    QTest::addColumn<int>("expLast");
    QTest::addColumn<double>("expStageWait");
    QTest::addColumn<double>("expBlamed");  // seconds waited on lastRank

    // clang-format off
    QTest::newRow("dp: waits for rank 1")      << "all_reduce" << "dp[0]" << 1 << 0.2 << 0.05 << 1
        << 0.05 << 0.2 - 0.05 << 0.0 << 1 << 0 << 0.05 << 0.05;
    QTest::newRow("tp: waits for rank 3")      << "all_gather" << "tp[0]" << 1 << 0.3 << 0.125 << 3
        << 0.125 << 0.3 - 0.125 << 0.0 << 1 << 0 << 0.125 << 0.125;
    QTest::newRow("wait clipped to duration") << "reduce_scatter" << "dp[0]" << 1 << 0.1 << 0.3 << 1
        << 0.1 << 0.0 << 0.0 << 1 << 0 << 0.1 << 0.1;
    QTest::newRow("wait equals duration")      << "all_reduce" << "dp[0]" << 1 << 0.1 << 0.1 << 2
        << 0.1 << 0.0 << 0.0 << 1 << 0 << 0.1 << 0.1;
    QTest::newRow("arrived last")              << "all_reduce" << "dp[0]" << 1 << 0.08 << 0.0 << 0
        << 0.0 << 0.08 << 0.0 << 1 << 1 << 0.0 << 0.0;
    // The last rank's own wait (timer jitter) is wait at a collective, but blame on nobody.
    QTest::newRow("arrived last, some wait") << "all_reduce" << "tp[0]" << 1 << 0.08 << 0.01 << 0
        << 0.01 << 0.07 << 0.0 << 1 << 1 << 0.01 << 0.0;
    QTest::newRow("no wait, another last")     << "all_reduce" << "dp[0]" << 1 << 0.08 << 0.0 << 3
        << 0.0 << 0.08 << 0.0 << 1 << 0 << 0.0 << 0.0;
    QTest::newRow("wait -1: unknown")          << "all_reduce" << "dp[0]" << 1 << 0.2 << -1.0 << 1
        << 0.0 << 0.0 << 0.2 << 0 << 0 << 0.0 << 0.0;
    QTest::newRow("wait -0.5: unknown")        << "all_reduce" << "dp[0]" << 1 << 0.2 << -0.5 << 1
        << 0.0 << 0.0 << 0.2 << 0 << 0 << 0.0 << 0.0;
    QTest::newRow("send: unknown")             << "send" << "pp[0]" << 2 << 0.04 << -1.0 << -1
        << 0.0 << 0.0 << 0.04 << 0 << 0 << 0.0 << 0.0;
    QTest::newRow("last rank unknown")         << "all_reduce" << "dp[0]" << 1 << 0.2 << 0.05 << -1
        << 0.05 << 0.2 - 0.05 << 0.0 << 0 << 0 << 0.0 << 0.0;
    QTest::newRow("world without a pipeline")  << "all_reduce" << "world" << 1 << 0.2 << 0.05 << 1
        << 0.05 << 0.2 - 0.05 << 0.0 << 1 << 0 << 0.05 << 0.05;
    QTest::newRow("world with a pipeline")     << "all_reduce" << "world" << 2 << 0.2 << 0.05 << 1
        << 0.05 << 0.2 - 0.05 << 0.0 << 0 << 0 << 0.0 << 0.0;
    QTest::newRow("dp with a pipeline")        << "all_reduce" << "dp[1]" << 2 << 0.2 << 0.05 << 1
        << 0.05 << 0.2 - 0.05 << 0.0 << 1 << 0 << 0.05 << 0.05;
    QTest::newRow("recv: waited, not in stage") << "recv" << "pp[0]" << 2 << 0.06 << 0.02 << 1
        << 0.02 << 0.06 - 0.02 << 0.0 << 0 << 0 << 0.0 << 0.0;
    QTest::newRow("recv on dp: not in stage")  << "recv" << "dp[0]" << 1 << 0.06 << 0.02 << 1
        << 0.02 << 0.06 - 0.02 << 0.0 << 0 << 0 << 0.0 << 0.0;
    QTest::newRow("send with a known wait")    << "send" << "dp[0]" << 1 << 0.06 << 0.01 << 1
        << 0.01 << 0.06 - 0.01 << 0.0 << 0 << 0 << 0.0 << 0.0;
    QTest::newRow("pp group collective")       << "all_reduce" << "pp[0]" << 2 << 0.2 << 0.05 << 1
        << 0.05 << 0.2 - 0.05 << 0.0 << 0 << 0 << 0.0 << 0.0;
    // clang-format on
  }

  void collectiveAccount() {
    QFETCH(QString, op);
    QFETCH(QString, group);
    QFETCH(int, pp);
    QFETCH(double, duration);
    QFETCH(double, wait);
    QFETCH(int, lastRank);
    QFETCH(double, expWait);
    QFETCH(double, expTransfer);
    QFETCH(double, expUnknown);
    QFETCH(int, expCollectives);
    QFETCH(int, expLast);
    QFETCH(double, expStageWait);
    QFETCH(double, expBlamed);

    StepPlan p;
    p.seconds = 1.0;
    p.colls = {{op.toStdString(), group.toStdString(), duration, wait, lastRank}};
    const TimeAccounting t = account(step_events(0, kFirst, p), pp);

    Sums e;
    e.step = kFirst;
    e.steps = 1;
    e.seconds = 1.0;
    e.wait = expWait;
    e.transfer = expTransfer;
    e.unknown = expUnknown;
    e.collectives = expCollectives;
    e.last = expLast;
    e.stage_wait = expStageWait;
    if (lastRank >= 0 && lastRank != 0) e.waited_on[lastRank] = expBlamed;
    check_account(t.window(0), e);
    // A wait never exceeds the duration it is part of.
    const StepAccount w = t.window(0);
    QVERIFY(w.wait <= duration);
    COMPARE_NEAR(w.wait + w.transfer + w.unknown, duration);
  }

  // A non-finite or negative figure counts as nothing; the rest of the step still counts and no
  // sum becomes NaN or infinite. Base step: a 0.25 s forward, a 0.5 s all-reduce with 0.125 s
  // wait, 2 s step, plus the row's odd event.
  void nonFiniteValuesIgnored_data() {
    QTest::addColumn<QString>("kind");  // "phase" (x, y: start, end offsets), "collective"
                                        // (x, y: duration, wait), "step" (x: step seconds)
    QTest::addColumn<double>("x");
    QTest::addColumn<double>("y");
    QTest::addColumn<double>("expCompute");
    QTest::addColumn<double>("expAccounted");  // wait + transfer + unknown
    QTest::addColumn<double>("expSeconds");

    // clang-format off
    QTest::newRow("phase end NaN")        << "phase" << 0.5 << kNaN << 0.25 << 0.5 << 2.0;
    QTest::newRow("phase end inf")        << "phase" << 0.5 << kInf << 0.25 << 0.5 << 2.0;
    QTest::newRow("phase start -inf")     << "phase" << -kInf << 0.75 << 0.25 << 0.5 << 2.0;
    QTest::newRow("phase end before start") << "phase" << 0.75 << 0.5 << 0.25 << 0.5 << 2.0;
    QTest::newRow("phase fine (control)") << "phase" << 0.5 << 0.75 << 0.5 << 0.5 << 2.0;
    QTest::newRow("duration NaN")         << "collective" << kNaN << 0.125 << 0.25 << 0.5 << 2.0;
    QTest::newRow("duration inf")         << "collective" << kInf << 0.125 << 0.25 << 0.5 << 2.0;
    QTest::newRow("duration inf, wait -1") << "collective" << kInf << -1.0 << 0.25 << 0.5 << 2.0;
    QTest::newRow("duration negative")    << "collective" << -0.25 << 0.0 << 0.25 << 0.5 << 2.0;
    QTest::newRow("wait NaN")             << "collective" << 0.25 << kNaN << 0.25 << 0.75 << 2.0;
    QTest::newRow("wait inf")             << "collective" << 0.25 << kInf << 0.25 << 0.75 << 2.0;
    QTest::newRow("step seconds NaN")     << "step" << kNaN << 0.0 << 0.25 << 0.5 << 0.0;
    QTest::newRow("step seconds inf")     << "step" << kInf << 0.0 << 0.25 << 0.5 << 0.0;
    QTest::newRow("step seconds negative") << "step" << -1.0 << 0.0 << 0.25 << 0.5 << 0.0;
    // clang-format on
  }

  void nonFiniteValuesIgnored() {
    QFETCH(QString, kind);
    QFETCH(double, x);
    QFETCH(double, y);
    QFETCH(double, expCompute);
    QFETCH(double, expAccounted);
    QFETCH(double, expSeconds);

    const double t = kT0 + static_cast<double>(kFirst) * kStride;
    std::vector<tl::Event> events;
    events.push_back(phase_event(0, 0, tl::Phase::forward, t, t + 0.25));
    events.push_back(
        make_event(0, t + 1, collective({"all_reduce", "dp[0]", 0.5, 0.125, 1}, t + 0.25, 1)));
    double seconds = 2.0;
    if (kind == "phase")
      events.push_back(phase_event(0, 0, tl::Phase::backward, t + x, t + y));
    else if (kind == "collective")
      events.push_back(
          make_event(0, t + 1.5, collective({"all_reduce", "dp[0]", x, y, 1}, t + 1, 2)));
    else
      seconds = x;
    events.push_back(step_event(0, kFirst, t + 2, seconds));

    RunModel m;
    feed(m, hellos(1, 1), events);
    for (const StepAccount& w : {account(events).window(0), m.time().window(0)}) {
      QCOMPARE(w.steps, int64_t{1});
      for (double v : {w.seconds, w.compute, w.busy, w.wait, w.transfer, w.unknown, w.stage_wait})
        QVERIFY2(std::isfinite(v) && v >= 0, qPrintable(QString::number(v)));
      for (const auto& [r, s] : w.waited_on) QVERIFY(std::isfinite(s) && s >= 0);
      COMPARE_NEAR(w.compute, expCompute);
      COMPARE_NEAR(w.busy, expCompute);  // forward and backward only
      COMPARE_NEAR(w.wait + w.transfer + w.unknown, expAccounted);
      COMPARE_NEAR(w.seconds, expSeconds);
      QVERIFY(std::isfinite(w.share(w.wait)));
      QVERIFY(w.wait >= 0.125);  // the base all-reduce's wait still counts
    }
    // The shares in the table are numbers, or "-" without step time.
    const std::string table = m.table(table_time(kFirst));
    const std::vector<std::string> row = words(row_of(table, 0));
    QVERIFY2(row.size() > kWaitWord, table.c_str());
    for (size_t i : {kCompWord, kWaitWord})
      QVERIFY2(!test::contains(row[i], "nan") && !test::contains(row[i], "inf"), table.c_str());
    if (expSeconds == 0) {
      QCOMPARE(row[kCompWord], std::string("-"));
      QCOMPARE(row[kWaitWord], std::string("-"));
    } else {
      QCOMPARE(row[kCompWord], percent(expCompute / expSeconds));
    }
  }

  // The window sums a rank's newest kWindowSlots full slots and the one still filling; older
  // steps drop out. Slow steps make a slot each, fast ones (1/64 s) four (kSlotSeconds).
  void windowKeepsTheLastSteps_data() {
    QTest::addColumn<int>("steps");  // reported, the warm-up included
    QTest::addColumn<bool>("fast");
    QTest::addColumn<int>("expSteps");  // steps the window holds
    QTest::addColumn<int>("expFirst");  // the oldest of them

    QCOMPARE(kWindowSlots, size_t{20});
    QCOMPARE(kSlotSeconds, 0.05);
    // clang-format off
    QTest::newRow("warm-up only")       << 1   << false << 0  << 0;
    QTest::newRow("1 step")             << 2   << false << 1  << 2;
    QTest::newRow("2 steps")            << 3   << false << 2  << 2;
    QTest::newRow("20 steps")           << 21  << false << 20 << 2;
    QTest::newRow("21 steps")           << 22  << false << 20 << 3;
    QTest::newRow("25 steps")           << 26  << false << 20 << 7;
    QTest::newRow("45 steps")           << 46  << false << 20 << 27;
    QTest::newRow("fast: 1 slot")       << 5   << true  << 4  << 2;
    QTest::newRow("fast: 3 steps")      << 4   << true  << 3  << 2;
    QTest::newRow("fast: 20 slots")     << 81  << true  << 80 << 2;
    QTest::newRow("fast: 20 slots + 1") << 82  << true  << 81 << 2;
    QTest::newRow("fast: 20 slots + 3") << 84  << true  << 83 << 2;
    QTest::newRow("fast: 21 slots")     << 85  << true  << 80 << 6;
    QTest::newRow("fast: 21 slots + 1") << 86  << true  << 81 << 6;
    QTest::newRow("fast: 99 steps")     << 100 << true  << 83 << 18;
    // clang-format on
  }

  void windowKeepsTheLastSteps() {
    QFETCH(int, steps);
    QFETCH(bool, fast);
    QFETCH(int, expSteps);
    QFETCH(int, expFirst);
    QCOMPARE(window_steps(steps, window_plan(steps, fast).seconds), int64_t{expSteps});

    const TimeAccounting t =
        account(run_events(1, steps, [=](int, int64_t n) { return window_plan(n, fast); }));
    Sums e;
    for (int n = expFirst; expSteps > 0 && n <= steps; ++n) {
      const StepPlan p = window_plan(n, fast);
      const Coll& ar = p.colls[0];
      e.step = n;
      ++e.steps;
      e.seconds += p.seconds;
      e.compute += p.fwd + p.bwd + p.opt;
      e.busy += p.fwd + p.bwd;
      e.wait += ar.wait;
      e.transfer += ar.duration - ar.wait;
      e.unknown += p.colls[1].duration;
      ++e.collectives;
      e.last += ar.last_rank == 0 ? 1 : 0;
      e.stage_wait += ar.wait;
      e.waited_on[1] += ar.last_rank == 1 ? ar.wait : 0.0;
    }
    QCOMPARE(e.steps, int64_t{expSteps});
    check_account(t.window(0), e);
  }

  // The verdict holds: rank 2 named while its peers wait 40% of their step for it (steps 1-40),
  // still named while they wait 7% (steps 41-80: under the full rule's 10%, over the hold's 5%;
  // a TimeAccounting asked directly, with no verdict, names nobody then), kept from memory for
  // kStragglerReleaseChecks checks once they wait 1% (steps 81-), and then let go.
  void stragglerVerdictHolds() {
    QCOMPARE(kStragglerPeerWait, 0.10);
    QCOMPARE(kStragglerHoldShare, 0.05);
    const std::vector<Hello> hs = hellos(1, 4);
    const Plan plan = [](int r, int64_t n) {
      StepPlan p = straggler_plan(r, n);
      const double w = n <= 40 ? 0.40 : n <= 80 ? 0.07 : 0.01;
      if (r != 2) p.colls[0] = Coll{"all_reduce", "dp[0]", w + 0.05, w, 2};
      return p;
    };
    {
      const std::vector<tl::Event> events = run_events(4, 40, plan);
      RunModel m;
      feed(m, hs, events);
      QVERIFY2(m.diagnosis().straggler && m.diagnosis().straggler->rank == 2,
               text_of(m.diagnosis()));
      QCOMPARE(m.diagnosis().straggler->full_rule, m.diagnosis().straggler->checks);
    }
    {
      const std::vector<tl::Event> events = run_events(4, 80, plan);
      RunModel m;
      feed(m, hs, events);
      const Diagnosis& d = m.diagnosis();
      QVERIFY2(d.straggler && d.straggler->rank == 2, text_of(d));
      QVERIFY2(d.straggler->full_rule < d.straggler->checks, text_of(d));
      VERIFY_CONTAINS(d.straggler->text, "its peers waited 7% of their step time for it");
      VERIFY_CONTAINS(d.straggler->text, "; named since step ");
      QVERIFY2(!account(events).diagnose(places_of(hs)).straggler.has_value(),
               "the full rule alone should name nobody at 7%");
    }
    {
      // Step 100: the window (steps 81-100) fails the looser rule too since about step 88, fewer
      // than kStragglerReleaseChecks checks ago: still named, from memory.
      QCOMPARE(kStragglerReleaseChecks, int64_t{40});
      const std::vector<tl::Event> events = run_events(4, 100, plan);
      RunModel m;
      feed(m, hs, events);
      QVERIFY2(m.diagnosis().straggler && m.diagnosis().straggler->rank == 2,
               text_of(m.diagnosis()));
      VERIFY_CONTAINS(m.diagnosis().straggler->text, "its peers waited 1% of their step time");
      QVERIFY(!account(events).diagnose(places_of(hs)).straggler.has_value());
    }
    {
      // Step 140: about 52 checks without support: let go.
      const std::vector<tl::Event> events = run_events(4, 140, plan);
      RunModel m;
      feed(m, hs, events);
      QVERIFY2(!m.diagnosis().straggler.has_value(), text_of(m.diagnosis()));
    }
  }

  // Rank 2 holds every step up: named, with the figures worked out from the plan; flagged in the
  // table on its row only.
  void stragglerNamed() {
    constexpr int64_t kSteps = kWarmUpSteps + 11;
    const std::vector<Hello> hs = hellos(1, 4);
    const std::vector<tl::Event> events = run_events(4, kSteps, straggler_plan);
    RunModel m;
    feed(m, hs, events);

    double blame = 0, peer_wait = 0, peer_seconds = 0;
    int64_t collectives2 = 0, last2 = 0, accounted = 0;
    std::map<int, double> rank_wait;  // every rank's wait over the accounted steps
    for (int64_t n = kFirst; n <= kSteps; ++n) {
      ++accounted;
      const int l = static_cast<int>(n % 4);
      for (int q : {0, 1, 3}) {
        peer_seconds += 1.0;
        peer_wait += 0.40;  // waits for rank 2 at the first all-reduce
        blame += 0.40;
        if (q != l) {  // and 10 ms at the second, for rank l
          peer_wait += 0.01;
          if (l == 2) blame += 0.01;
        }
        rank_wait[q] += 0.40 + (q != l ? 0.01 : 0.0);
      }
      rank_wait[2] += l != 2 ? 0.01 : 0.0;
      collectives2 += 2;
      last2 += 1 + (l == 2 ? 1 : 0);
    }
    ExpectedStraggler e;
    e.rank = 2;
    e.coords = "pp0 tp0 dp2";
    e.peer_wait_share = blame / peer_seconds;
    e.blame_share = blame / peer_wait;
    e.last_share = static_cast<double>(last2) / static_cast<double>(collectives2);
    e.steps = accounted;
    check_straggler(m.diagnosis(), e);
    if (QTest::currentTestFailed()) return;
    // The figures as a person reads them (40% of step time, 99% of all waiting, last at 64%).
    // Named at the first check after its window could be judged (steps 2-11: 10 steps and 10 s),
    // the full rule holding at every check since.
    QCOMPARE(m.diagnosis().straggler->text,
             std::string("rank 2 (pp0 tp0 dp2) is slow: its peers waited 40% of their step time "
                         "for it, 99% of all their waiting (last 11 steps; it arrived last at 64% "
                         "of its collectives); named since step " +
                         std::to_string(m.diagnosis().straggler->named_since) +
                         ", the full rule held at 100% of the " +
                         std::to_string(m.diagnosis().straggler->checks) + " checks since"));
    QVERIFY(m.diagnosis().straggler->named_since >= kWarmUpSteps + 10);
    QVERIFY(m.diagnosis().straggler->checks >= 1);
    QVERIFY(!m.diagnosis().bottleneck.has_value());
    QVERIFY(m.diagnosis().stages.empty());  // no pipeline
    QCOMPARE(m.diagnosis().lines().size(), size_t{1});

    // The same events straight into a TimeAccounting with the same places say the same.
    QCOMPARE(m.places().size(), size_t{4});
    const Diagnosis direct = account(events).diagnose(places_of(hs));
    check_straggler(direct, e);
    if (QTest::currentTestFailed()) return;

    QVERIFY(m.straggler(2));
    for (int r : {0, 1, 3}) QVERIFY(!m.straggler(r));
    QVERIFY(!m.straggler(7));

    const std::string table = m.table(table_time(kSteps));
    VERIFY_CONTAINS(table, e.text() + "; named since step ");
    QVERIFY2(!test::contains(table, "pipeline:"), table.c_str());
    for (int r = 0; r < 4; ++r) {
      const std::string row = row_of(table, r);
      QVERIFY2(!row.empty(), table.c_str());
      QCOMPARE(test::contains(row, "STRAGGLER"), r == 2);
      const std::vector<std::string> w = words(row);
      QVERIFY2(w.size() > kWaitWord, row.c_str());
      QCOMPARE(w[kCompWord], percent((0.2 + 0.3 + 0.05) / 1.0));
      QCOMPARE(w[kWaitWord], percent(rank_wait[r] / static_cast<double>(accounted)));
    }
    size_t flagged = 0;
    for (size_t at = table.find("STRAGGLER"); at != std::string::npos;
         at = table.find("STRAGGLER", at + 1))
      ++flagged;
    QCOMPARE(flagged, size_t{1});
  }

  // Steps of 6.4 ms (a slot is 8 of them, 51.2 ms) that end with a slot filling: the window
  // still holds kWindowSlots full slots (over kMinDiagnosisSeconds) and the straggler is named.
  // When the filling slot pushed out a full one, the window held 19 full slots and one step,
  // 0.979 s, and nobody was named at the end of such a job.
  void stragglerNamedWhileASlotFills() {
    constexpr double kScale = 0.0064;
    constexpr int64_t kPerSlot = 8;
    QVERIFY(7 * kScale < kSlotSeconds && kPerSlot * kScale >= kSlotSeconds);
    const Plan scaled = [](int r, int64_t n) {
      StepPlan p = straggler_plan(r, n);
      p.fwd *= kScale;
      p.bwd *= kScale;
      p.opt *= kScale;
      p.seconds *= kScale;
      for (Coll& c : p.colls) {
        c.duration *= kScale;
        c.wait *= kScale;
      }
      return p;
    };
    for (const int64_t filling : {int64_t{1}, kPerSlot - 1}) {
      const int64_t steps =
          kWarmUpSteps + static_cast<int64_t>(kWindowSlots + 2) * kPerSlot + filling;
      const TimeAccounting t = account(run_events(4, steps, scaled));
      const int64_t expected_steps = static_cast<int64_t>(kWindowSlots) * kPerSlot + filling;
      for (int r = 0; r < 4; ++r) {
        const StepAccount w = t.window(r);
        QCOMPARE(w.steps, expected_steps);
        QVERIFY2(w.seconds >= kMinDiagnosisSeconds, qPrintable(QString::number(w.seconds)));
        COMPARE_NEAR(w.seconds, static_cast<double>(expected_steps) * kScale);
      }
      const Diagnosis d = t.diagnose(places_of(hellos(1, 4)));
      QVERIFY2(d.straggler.has_value(), qPrintable(QString("%1 steps").arg(steps)));
      QCOMPARE(d.straggler->rank, 2);
      QCOMPARE(d.straggler->steps, expected_steps);
    }
  }

  // Without places (no HELLOs): the text has no coordinates, and every rank counts as stage 0.
  void stragglerWithoutPlaces() {
    constexpr int64_t kSteps = 13;
    const std::vector<tl::Event> events = run_events(
        4, kSteps, [](int r, int64_t) { return suspects(r, 0.375, 0.0, 0.0, 1.0, 1.0); });
    const Diagnosis d = account(events).diagnose({});
    ExpectedStraggler e = suspects_expected({kSteps, kSteps, kSteps, kSteps}, 0.375, 0.0, 1.0);
    e.coords.clear();
    check_straggler(d, e);
    if (QTest::currentTestFailed()) return;
    QVERIFY(d.straggler->text.starts_with("rank 2 is slow: "));
    QVERIFY(d.stages.empty());

    // RunModel without HELLOs: the same.
    RunModel m;
    feed(m, {}, events);
    check_straggler(m.diagnosis(), e);
    QVERIFY(m.straggler(2));
  }

  // The straggler rules at and around their thresholds. suspects(): at A rank 2 is last and the
  // others wait a; at B rank 1 is last and the others wait b; at C rank 0 is last and rank 2
  // waits c. Rank 2 is named when a / seconds >= 10% (peer wait), 3a >= 2 * max(3b, c)
  // (dominance), its own time culpritSeconds - b - c >= 1.1 (seconds - a) (the least waiting
  // peer, rank 1) and every rank has at least 10 steps and 1 s in its window.
  void stragglerRules_data() {
    QTest::addColumn<double>("a");
    QTest::addColumn<double>("b");
    QTest::addColumn<double>("c");
    QTest::addColumn<double>("seconds");
    QTest::addColumn<double>("culpritSeconds");
    QTest::addColumn<int>("steps");  // accounted (the warm-up comes on top)
    QTest::addColumn<int>("named");  // the rank named, -1 nobody

    QCOMPARE(kStragglerPeerWait, 0.10);
    QCOMPARE(kStragglerDominance, 2.0);
    QCOMPARE(kStragglerOwnRatio, 1.1);
    QCOMPARE(kMinDiagnosisSteps, int64_t{10});
    QCOMPARE(kMinDiagnosisSeconds, 1.0);
    constexpr double kFast = 3.0 / 64;  // two steps a slot
    const int enough = 12;
    // clang-format off
    QTest::newRow("rank 2 alone")
        << 0.375 << 0.0 << 0.0 << 1.0 << 1.0 << enough << 2;
    // Dominance: rank 2's blame (3a) against rank 1's (3b).
    QTest::newRow("blame 1.5x the next: nobody")
        << 0.625 << 0.625 / 1.5 << 0.0 << 1.0 << 1.0 << enough << -1;
    QTest::newRow("blame 1.9x the next: nobody")
        << 0.625 << 0.625 / 1.9 << 0.0 << 1.0 << 1.0 << enough << -1;
    QTest::newRow("blame exactly 2x the next")
        << 0.625 << 0.3125 << 0.0 << 1.0 << 1.0 << enough << 2;
    QTest::newRow("blame equal: nobody")
        << 0.5 << 0.5 << 0.0 << 1.0 << 2.0 << enough << -1;
    // Peer wait share: rank 2's blame over its peers' step time (the own-time rule met by a
    // longer step of rank 2's).
    QTest::newRow("peer wait 5%: nobody")
        << 0.05 << 0.0 << 0.0 << 1.0 << 2.0 << enough << -1;
    QTest::newRow("peer wait 9.6%: nobody")
        << 0.12 << 0.0 << 0.0 << 1.25 << 2.5 << enough << -1;
    QTest::newRow("peer wait exactly 10%")
        << 0.125 << 0.0 << 0.0 << 1.25 << 2.5 << enough << 2;
    // Own time: rank 2's step less its waits against the peers'. Equal steps and peers waiting
    // 20%: own time 1.25x.
    QTest::newRow("peer wait 20%, own 1.25x")
        << 0.2 << 0.0 << 0.0 << 1.0 << 1.0 << enough << 2;
    QTest::newRow("culprit waits as much: nobody")
        << 0.375 << 0.0 << 0.375 << 1.0 << 1.0 << enough << -1;
    QTest::newRow("own time 1.05x: nobody")
        << 0.375 << 0.0 << 0.34375 << 1.0 << 1.0 << enough << -1;
    QTest::newRow("own time 1.125x")
        << 0.375 << 0.0 << 0.296875 << 1.0 << 1.0 << enough << 2;
    // Rank 2 waits b at B too: own time 0.8125 against 1.1 x 0.625 (blame exactly 2x rank 1's).
    QTest::newRow("culprit's wait at B counts, own 1.3x")
        << 0.375 << 0.1875 << 0.0 << 1.0 << 1.0 << enough << 2;
    // Enough steps and seconds in every window.
    QTest::newRow("9 steps: nobody")               << 0.375 << 0.0 << 0.0 << 1.0 << 1.0 << 9 << -1;
    QTest::newRow("10 steps")                      << 0.375 << 0.0 << 0.0 << 1.0 << 1.0 << 10 << 2;
    QTest::newRow("21 fast steps, 0.98 s: nobody")
        << 0.375 * kFast << 0.0 << 0.0 << kFast << kFast << 21 << -1;
    QTest::newRow("22 fast steps, 1.03 s")
        << 0.375 * kFast << 0.0 << 0.0 << kFast << kFast << 22 << 2;
    // clang-format on
  }

  void stragglerRules() {
    QFETCH(double, a);
    QFETCH(double, b);
    QFETCH(double, c);
    QFETCH(double, seconds);
    QFETCH(double, culpritSeconds);
    QFETCH(int, steps);
    QFETCH(int, named);

    const int64_t reported = steps + kWarmUpSteps;
    const std::vector<Hello> hs = hellos(1, 4);
    const std::vector<tl::Event> events = run_events(
        4, reported, [=](int r, int64_t) { return suspects(r, a, b, c, seconds, culpritSeconds); });
    RunModel m;
    feed(m, hs, events);
    const Diagnosis direct = account(events).diagnose(places_of(hs));
    // A RunModel's verdict moves at its checks (once per round of slots, settle()); in the row
    // whose window first qualifies at the job's very last step no check follows, so only the
    // accounting asked directly names the rank there.
    const bool checked = QByteArray(QTest::currentDataTag()) != "22 fast steps, 1.03 s";
    if (!checked) QVERIFY2(!m.diagnosis().straggler.has_value(), text_of(m.diagnosis()));
    for (const Diagnosis* d : {&m.diagnosis(), &direct}) {
      if (d == &m.diagnosis() && !checked) continue;
      if (named < 0) {
        QVERIFY2(!d->straggler.has_value(), text_of(*d));
        QVERIFY(d->lines().empty());
      } else {
        // Rank 2's window steps: its own step time decides its slots.
        ExpectedStraggler e =
            suspects_expected({reported, reported, reported, reported}, a, b, seconds);
        e.steps = window_steps(reported, culpritSeconds);
        check_straggler(*d, e);
        if (QTest::currentTestFailed()) return;
      }
    }
    if (!checked) return;
    for (int r = 0; r < 4; ++r) QCOMPARE(m.straggler(r), r == named);
    const std::string table = m.table(table_time(reported));
    QCOMPARE(test::contains(table, "STRAGGLER"), named >= 0);
    QCOMPARE(test::contains(table, "is slow"), named >= 0);
  }

  // Every rank arrives last in turn and the others wait 40% of their step for it: plenty of
  // waiting, nobody to blame.
  void nobodyWhenEveryRankIsLastInTurn() {
    constexpr int64_t kSteps = kWarmUpSteps + 20;
    const std::vector<Hello> hs = hellos(1, 4);
    const Plan plan = [](int r, int64_t n) {
      StepPlan p;
      p.fwd = 0.2;
      p.bwd = 0.3;
      p.seconds = 1.0;
      const int l = static_cast<int>(n % 4);
      p.colls = {{"all_reduce", "dp[0]", r == l ? 0.05 : 0.45, r == l ? 0.0 : 0.4, l}};
      return p;
    };
    RunModel m;
    feed(m, hs, run_events(4, kSteps, plan));
    QVERIFY2(!m.diagnosis().straggler.has_value(), text_of(m.diagnosis()));
    for (int r = 0; r < 4; ++r) {
      QVERIFY(!m.straggler(r));
      // 20 steps in the window: last at 5, waiting 0.4 s at the other 15.
      const StepAccount w = m.time().window(r);
      QCOMPARE(w.steps, int64_t{20});
      QCOMPARE(w.last, int64_t{5});
      COMPARE_NEAR(w.stage_wait, 15 * 0.4);
      COMPARE_NEAR(w.share(w.wait), 15 * 0.4 / 20.0);
      for (int q = 0; q < 4; ++q) COMPARE_NEAR(waited_on(w, q), q == r ? 0.0 : 5 * 0.4);
    }
    const std::string table = m.table(table_time(kSteps));
    QVERIFY2(!test::contains(table, "STRAGGLER") && !test::contains(table, "is slow"),
             table.c_str());
    QCOMPARE(words(row_of(table, 1))[kWaitWord], percent(15 * 0.4 / 20.0));
  }

  // Every rank slow together: long steps (and an evaluation-like 5.5 s step every fourth step)
  // with no waiting at the collectives: nobody waits for anybody, nobody is named.
  void nobodyWhenEveryoneIsSlow() {
    constexpr int64_t kSteps = 12;
    const std::vector<Hello> hs = hellos(1, 4);
    const Plan plan = [](int r, int64_t n) {
      StepPlan p;
      const bool eval = n % 4 == 0;
      p.fwd = eval ? 3.0 : 1.5;
      p.bwd = 2.0;
      p.opt = 0.3;
      p.seconds = eval ? 5.5 : 4.0;
      p.colls = {{"all_reduce", "dp[0]", 0.15, 0.0, static_cast<int>(n % 4)},
                 {"all_reduce", "world", 0.05, 0.0, r}};
      return p;
    };
    RunModel m;
    feed(m, hs, run_events(4, kSteps, plan));
    QVERIFY2(!m.diagnosis().straggler.has_value(), text_of(m.diagnosis()));
    double seconds = 0, compute = 0;
    for (int64_t n = kFirst; n <= kSteps; ++n) {
      const bool eval = n % 4 == 0;
      seconds += eval ? 5.5 : 4.0;
      compute += (eval ? 3.0 : 1.5) + 2.0 + 0.3;
    }
    for (int r = 0; r < 4; ++r) {
      QVERIFY(!m.straggler(r));
      const StepAccount w = m.time().window(r);
      QCOMPARE(w.wait, 0.0);
      QVERIFY(w.waited_on.empty());
      COMPARE_NEAR(w.seconds, seconds);
      COMPARE_NEAR(w.compute, compute);
    }
    QVERIFY(!test::contains(m.table(table_time(kSteps)), "STRAGGLER"));
  }

  // With a pipeline, waits across stages (recv, and "world", which spans the stages) are its
  // bubble, not blame: rank 2 is last at the world all-reduce every step but is not named, and
  // nobody's window holds waits on it. The same events read as one stage (pp 1) do blame it.
  void pipelineWaitsAreNotBlame() {
    constexpr int64_t kSteps = kWarmUpSteps + 11;
    const std::vector<Hello> hs = hellos(2, 2);
    const std::vector<tl::Event> events = run_events(4, kSteps, pipeline_plan);
    RunModel m;
    feed(m, hs, events);
    QVERIFY2(!m.diagnosis().straggler.has_value(), text_of(m.diagnosis()));
    for (int r = 0; r < 4; ++r) QVERIFY(!m.straggler(r));
    // Busy 50% against 55%: balanced.
    QVERIFY(!m.diagnosis().bottleneck.has_value());
    QCOMPARE(m.diagnosis().stages.size(), size_t{2});
    COMPARE_NEAR(m.diagnosis().stages[0].busy, 0.5);
    COMPARE_NEAR(m.diagnosis().stages[1].busy, 0.55);

    // Rank 0's waits all count as wait; only the dp[0] all-reduce is a collective of its stage.
    Sums e;
    e.step = kSteps;
    double world_wait = 0, rank3_on_2 = 0;
    for (int64_t n = kFirst; n <= kSteps; ++n) {
      rank3_on_2 += n % 2 == 0 ? 0.005 : 0.0;  // dp[1] last on rank 2 + n % 2
      const bool last = n % 2 == 0;            // dp[0] last on rank n % 2
      const double dp_wait = last ? 0.0 : 0.005;
      ++e.steps;
      e.seconds += 1.0;
      e.compute += 0.25 + 0.25 + 0.05;
      e.busy += 0.25 + 0.25;
      e.wait += 0.15 + dp_wait + 0.2;
      e.transfer += (0.2 - 0.15) + (0.02 - dp_wait) + (0.22 - 0.2);
      e.unknown += 0.01;
      ++e.collectives;
      e.last += last ? 1 : 0;
      e.stage_wait += dp_wait;
      e.waited_on[1] += dp_wait;
      world_wait += 0.2;
    }
    check_account(m.time().window(0), e);
    if (QTest::currentTestFailed()) return;
    for (int q : {0, 1, 3})
      COMPARE_NEAR(waited_on(m.time().window(q), 2), q == 3 ? rank3_on_2 : 0.0);

    const std::string table = m.table(table_time(kSteps));
    QVERIFY2(!test::contains(table, "STRAGGLER"), table.c_str());
    VERIFY_CONTAINS(table, fmt::format("pipeline: busy {:.0f}% on stage 0, {:.0f}% on stage 1\n",
                                       100 * 0.5, 100 * 0.55));
    QVERIFY2(!test::contains(table, "bottleneck"), table.c_str());
    QCOMPARE(words(row_of(table, 0))[kWaitWord], percent(e.wait / e.seconds));

    // Read as one stage, "world" is inside it: ranks 0 and 1 wait 0.2 s a step for rank 2 there.
    const TimeAccounting flat = account(events, 1);
    for (int q : {0, 1}) {
      COMPARE_NEAR(waited_on(flat.window(q), 2), world_wait);
      QCOMPARE(flat.window(q).collectives, int64_t{2 * e.steps});
    }
  }

  // Inside a stage the rules apply as without a pipeline: rank 3 waits 0.4 s a step for rank 2 at
  // dp[1]; rank 2's only peer is rank 3. A (bogus) dp[0] wait of stage 0 naming rank 2 is not
  // blame: rank 2 is not in its stage.
  void pipelineStageStraggler() {
    constexpr int64_t kSteps = kWarmUpSteps + 10;
    const std::vector<Hello> hs = hellos(2, 2);
    const Plan plan = [](int r, int64_t n) {
      StepPlan p;
      p.stage = r / 2;
      p.fwd = 0.25;
      p.bwd = 0.25;
      p.seconds = 1.0;
      if (p.stage == 0) {
        const int l = static_cast<int>(n % 2);
        p.colls = {{"send", "pp[0]", 0.01, -1, -1},
                   {"all_reduce", "dp[0]", 0.02, r == l ? 0.0 : 0.005, l},
                   {"all_reduce", "dp[0]", 0.35, 0.3, 2},  // names a rank of another stage
                   {"all_reduce", "world", 0.2, 0.15, 2}};
      } else {
        p.colls = {{"recv", "pp[0]", 0.3, 0.25, r - 2},
                   {"all_reduce", "dp[1]", r == 2 ? 0.05 : 0.45, r == 2 ? 0.0 : 0.4, 2},
                   {"all_reduce", "world", 0.05, r == 2 ? 0.0 : 0.01, 2}};
      }
      return p;
    };
    RunModel m;
    feed(m, hs, run_events(4, kSteps, plan));
    const int64_t accounted = kSteps - kWarmUpSteps;
    ExpectedStraggler e;
    e.rank = 2;
    e.coords = "pp1 tp0 dp0";
    e.peer_wait_share = (static_cast<double>(accounted) * 0.4) / static_cast<double>(accounted);
    e.blame_share = 1.0;  // rank 3's only in-stage wait
    e.last_share = 1.0;   // its only in-stage collective is dp[1], last every step
    e.steps = accounted;
    check_straggler(m.diagnosis(), e);
    if (QTest::currentTestFailed()) return;
    for (int r = 0; r < 4; ++r) QCOMPARE(m.straggler(r), r == 2);
    QVERIFY(!m.diagnosis().bottleneck.has_value());  // 50% on both stages
    VERIFY_CONTAINS(m.table(table_time(kSteps)), "rank 2 (pp1 tp0 dp0) is slow: ");
  }

  // Two stages name a rank each: stage 0's rank 0 holds its dp partner up, and stage 1's rank 2,
  // which waits for rank 0's activations, holds its own dp partner up in turn (more than rank 0
  // does). Rank 2 waited for rank 0's messages 40% of its step: it is rank 0's victim, and rank 0
  // is the straggler. Without those receive waits rank 2 would be named.
  void pipelineVictimIsNotNamed_data() {
    QTest::addColumn<double>("fedWait");  // rank 2's recv wait for rank 0's messages
    QTest::addColumn<int>("named");
    QTest::newRow("rank 2 waited for rank 0: rank 0") << 0.4 << 0;
    QTest::newRow("rank 2 waited 5%: rank 2") << 0.05 << 2;
  }
  void pipelineVictimIsNotNamed() {
    QFETCH(double, fedWait);
    QFETCH(int, named);
    constexpr int64_t kSteps = kWarmUpSteps + 10;
    const std::vector<Hello> hs = hellos(2, 2);  // stage 0: ranks 0, 1; stage 1: ranks 2, 3
    const Plan plan = [fedWait](int r, int64_t) {
      StepPlan p;
      p.stage = r / 2;
      p.fwd = 0.125;
      p.bwd = 0.125;
      p.seconds = 1.0;
      if (r == 0) p.colls = {{"all_reduce", "dp[0]", 0.01, 0.0, 0}};
      if (r == 1) p.colls = {{"all_reduce", "dp[0]", 0.41, 0.4, 0}};
      // Rank 2's own time 1 - fedWait against rank 3's 1 - 0.5 - 0.125 (1.2x and more).
      if (r == 2)
        p.colls = {{"recv", "pp[0]", fedWait, fedWait, 0}, {"all_reduce", "dp[1]", 0.01, 0.0, 2}};
      if (r == 3)
        p.colls = {{"recv", "pp[1]", 0.125, 0.125, 1}, {"all_reduce", "dp[1]", 0.51, 0.5, 2}};
      return p;
    };
    RunModel m;
    feed(m, hs, run_events(4, kSteps, plan));
    const Diagnosis& d = m.diagnosis();
    QVERIFY2(d.straggler.has_value(),
             qPrintable(QString::fromStdString(m.table(table_time(kSteps)))));
    QCOMPARE(d.straggler->rank, named);
    for (int r = 0; r < 4; ++r) QCOMPARE(m.straggler(r), r == named);
  }

  // The imbalance rule: the busiest stage is out of balance when its busy share is at least
  // 1.25x and 15 points above every other stage's. After an even baseline (50% on both stages in
  // the first judged window) it is named the bottleneck: its growth against the baseline is then
  // its share against the other's. Each row's shares fill the window (steps kChangeStep on).
  void bottleneck_data() {
    QTest::addColumn<double>("busy0");
    QTest::addColumn<double>("busy1");
    QTest::addColumn<int>("stage");     // the bottleneck, -1 none
    QTest::addColumn<QString>("text");  // the words, where given

    QCOMPARE(kBottleneckRatio, 1.25);
    QCOMPARE(kBottleneckMargin, 0.15);
    QCOMPARE(kBottleneckDrift, 1.5);
    // clang-format off
    QTest::newRow("stage 1 at 88% against 51%")   << 0.51 << 0.88 << 1
        << "stage 1 is the bottleneck: busy 88% against 51% on stage 0 (was 50% against 50% at "
           "step 11)";
    QTest::newRow("stage 0 at 90% against 50%")   << 0.90 << 0.50 << 0
        << "stage 0 is the bottleneck: busy 90% against 50% on stage 1 (was 50% against 50% at "
           "step 11)";
    QTest::newRow("balanced, 60% against 55%")    << 0.55 << 0.60 << -1 << "";
    // The drift rule: from the even baseline the growth is the ratio; 1.5x names the stage, an
    // imbalance that grew less is not conclusive (and not uneven: the baseline was even).
    QTest::newRow("drift exactly 1.5, margin 0.3") << 0.6 << 0.9 << 1 << "";
    QTest::newRow("drift 1.45, ratio 1.45, margin 0.27: none") << 0.6 << 0.87 << -1 << "";
    // The ratio rule (the margin well met; the drift, from the even baseline, is the ratio).
    QTest::newRow("ratio exactly 1.25, margin 0.1875: none (drift 1.25)") << 0.75 << 0.9375 << -1
                                                                          << "";
    QTest::newRow("ratio 1.2, margin 0.16: none") << 0.80 << 0.96 << -1 << "";
    QTest::newRow("ratio 1.24, margin 0.18: none") << 0.75 << 0.93 << -1 << "";
    // The margin rule (the ratio well met).
    QTest::newRow("margin 0.16, ratio 1.64")      << 0.25 << 0.41 << 1 << "";
    QTest::newRow("margin 0.14, ratio 1.56: none") << 0.25 << 0.39 << -1 << "";
    QTest::newRow("margin 0.1, ratio 1.3: none")  << 1.0 / 3 << 1.3 / 3 << -1 << "";
    QTest::newRow("ratio exactly 1.25, margin 0.125: none") << 0.5 << 0.625 << -1 << "";
    QTest::newRow("margin 0.125, ratio 2: none")  << 0.125 << 0.25 << -1 << "";
    // clang-format on
  }

  void bottleneck() {
    QFETCH(double, busy0);
    QFETCH(double, busy1);
    QFETCH(int, stage);
    QFETCH(QString, text);

    QCOMPARE(kBaselineStep, int64_t{11});
    const std::vector<Hello> hs = hellos(2, 2);
    const std::vector<tl::Event> events =
        run_events(4, kChangedSteps, changing_stages(0.5, 0.5, busy0, busy1, 1.0));
    RunModel m;
    feed(m, hs, events);
    const Diagnosis direct = account(events, 2).diagnose(places_of(hs));
    const double busy[2] = {busy0, busy1};
    for (const Diagnosis* d : {&m.diagnosis(), &direct}) {
      QCOMPARE(d->stages.size(), size_t{2});
      for (int s = 0; s < 2; ++s) {
        const StageBusy& b = d->stages[static_cast<size_t>(s)];
        QCOMPARE(b.stage, s);
        COMPARE_NEAR(b.busy, busy[s]);
        COMPARE_NEAR(b.baseline, 0.5);
        QCOMPARE(b.baseline_step, kBaselineStep);
      }
      QVERIFY(!d->straggler.has_value());
      QVERIFY2(!d->uneven.has_value(), text_of(*d));
      if (stage < 0) {
        QVERIFY2(!d->bottleneck.has_value(), text_of(*d));
        QVERIFY(d->lines().empty());
        continue;
      }
      QVERIFY(d->bottleneck.has_value());
      const int other = 1 - stage;
      const std::string expected = fmt::format(
          "stage {} is the bottleneck: busy {:.0f}% against {:.0f}% on stage {} (was 50% against "
          "50% at step {})",
          stage, 100 * busy[stage], 100 * busy[other], other, kBaselineStep);
      QCOMPARE(d->bottleneck->stage, stage);
      QCOMPARE(d->bottleneck->next_stage, other);
      COMPARE_NEAR(d->bottleneck->busy, busy[stage]);
      COMPARE_NEAR(d->bottleneck->next_busy, busy[other]);
      COMPARE_NEAR(d->bottleneck->baseline, 0.5);
      COMPARE_NEAR(d->bottleneck->next_baseline, 0.5);
      QCOMPARE(d->bottleneck->baseline_step, kBaselineStep);
      QCOMPARE(d->bottleneck->text, expected);
      if (!text.isEmpty()) QCOMPARE(d->bottleneck->text, text.toStdString());
      QCOMPARE(d->lines(), std::vector<std::string>{expected});
    }
    const std::string table = m.table(table_time(kChangedSteps));
    VERIFY_CONTAINS(table, fmt::format("pipeline: busy {:.0f}% on stage 0, {:.0f}% on stage 1\n",
                                       100 * busy0, 100 * busy1));
    QCOMPARE(test::contains(table, "is the bottleneck"), stage >= 0);
    if (!text.isEmpty()) VERIFY_CONTAINS(table, text.toStdString() + "\n");
    QVERIFY2(!test::contains(table, "STRAGGLER"), table.c_str());
    QVERIFY2(!test::contains(table, "uneven"), table.c_str());
    // COMP% counts the optimizer too.
    for (int r = 0; r < 4; ++r)
      QCOMPARE(words(row_of(table, r))[kCompWord], percent(busy[r / 2] + 0.0625));
  }

  // An uneven layout against a stage that becomes slow: the baseline (the first judged window,
  // steps 2-11 of 1 s) has busy seconds base0 / base1; from step 12 on busy0 / busy1 in steps of
  // `seconds`, through the whole window. Out of balance now (the rule above) and grown against the
  // baseline 1.25x as much as the next stage: the bottleneck; out of balance as in the baseline:
  // uneven, naming nobody; neither when balanced now.
  void unevenOrSlowed_data() {
    QTest::addColumn<double>("base0");
    QTest::addColumn<double>("base1");
    QTest::addColumn<double>("busy0");
    QTest::addColumn<double>("busy1");
    QTest::addColumn<double>("seconds");
    QTest::addColumn<QString>("expected");  // the one line the diagnosis says ("" none)
    QTest::addColumn<int>("bottleneck");    // its stage, -1 none
    QTest::addColumn<int>("uneven");        // its stage, -1 none

    const QString even_it =
        "which parallel.pp_partition=balanced, or moving a block, would even out";
    // (a) The EPYC: the last stage (output head and loss) costlier from the start.
    QTest::newRow("uneven from the start: stage 1")
        << 0.61 << 0.80 << 0.61 << 0.80 << 1.0
        << "stages are uneven: stage 1 busy 80% against 61% on stage 0 (it holds the output head "
           "and the loss), " +
               even_it
        << -1 << 1;
    QTest::newRow("uneven from the start: stage 0")
        << 0.80 << 0.61 << 0.80 << 0.61 << 1.0
        << "stages are uneven: stage 0 busy 80% against 61% on stage 1 (it holds the embedding), " +
               even_it
        << -1 << 0;
    // Every stage 2x slower at once (a busy machine): the same shares, still only uneven.
    QTest::newRow("uneven, everything 2x slower")
        << 0.30 << 0.48 << 0.60 << 0.96 << 2.0
        << "stages are uneven: stage 1 busy 48% against 30% on stage 0 (it holds the output head "
           "and the loss), " +
               even_it
        << -1 << 1;
    // (b) The same kind of layout, stage 1 then 2x slower (its forward and backward take twice
    // as long; the step grows from 1 s to 1.5 s): 64% against 20%, grown 1.33x against 0.67x.
    QTest::newRow("uneven, then stage 1 2x slower")
        << 0.30 << 0.48 << 0.30 << 0.96 << 1.5
        << "stage 1 is the bottleneck: busy 64% against 20% on stage 0 (was 48% against 30% at "
           "step 11)"
        << 1 << -1;
    // The cheaper stage becomes slow and overtakes the costlier one.
    QTest::newRow("uneven, then stage 0 slowed past stage 1")
        << 0.61 << 0.80 << 1.60 << 0.80 << 2.0
        << "stage 0 is the bottleneck: busy 80% against 40% on stage 1 (was 61% against 80% at "
           "step 11)"
        << 0 << -1;
    // The costlier stage grows, but less than 1.5x as much as the other.
    QTest::newRow("uneven, stage 1 grows 1.2x against 1.0x: uneven")
        << 0.30 << 0.50 << 0.30 << 0.60 << 1.0
        << "stages are uneven: stage 1 busy 60% against 30% on stage 0 (it holds the output head "
           "and the loss), " +
               even_it
        << -1 << 1;
    // (c) Even stages: neither, also when one grows 1.33x but stays within the margin.
    QTest::newRow("even stages") << 0.50 << 0.55 << 0.50 << 0.55 << 1.0 << "" << -1 << -1;
    QTest::newRow("even, stage 1 grows 1.33x within the margin")
        << 0.30 << 0.30 << 0.30 << 0.40 << 1.0 << "" << -1 << -1;
    // Even at first, then out of balance by a drift short of 1.5x: not conclusive, nothing said
    // (neither slow nor uneven from the start).
    QTest::newRow("even, stage 1 grows 1.3x past the margin")
        << 0.50 << 0.50 << 0.50 << 0.65 << 1.0 << "" << -1 << -1;
    // The order reversed: the cheaper stage grows 1.47x past the other, short of 1.5x.
    QTest::newRow("uneven, stage 0 grows 1.47x past stage 1")
        << 0.45 << 0.50 << 0.66 << 0.50 << 1.0 << "" << -1 << -1;
  }

  void unevenOrSlowed() {
    QFETCH(double, base0);
    QFETCH(double, base1);
    QFETCH(double, busy0);
    QFETCH(double, busy1);
    QFETCH(double, seconds);
    QFETCH(QString, expected);
    QFETCH(int, bottleneck);
    QFETCH(int, uneven);

    const std::vector<Hello> hs = hellos(2, 2);
    const std::vector<tl::Event> events =
        run_events(4, kChangedSteps, changing_stages(base0, base1, busy0, busy1, seconds));
    RunModel m;
    feed(m, hs, events);
    const Diagnosis direct = account(events, 2).diagnose(places_of(hs));
    for (const Diagnosis* d : {&m.diagnosis(), &direct}) {
      QCOMPARE(d->stages.size(), size_t{2});
      COMPARE_NEAR(d->stages[0].busy, busy0 / seconds);
      COMPARE_NEAR(d->stages[1].busy, busy1 / seconds);
      COMPARE_NEAR(d->stages[0].baseline, base0);
      COMPARE_NEAR(d->stages[1].baseline, base1);
      QVERIFY(!d->straggler.has_value());
      QCOMPARE(d->bottleneck ? d->bottleneck->stage : -1, bottleneck);
      QCOMPARE(d->uneven ? d->uneven->stage : -1, uneven);
      if (d->uneven) {
        QCOMPARE(d->uneven->next_stage, 1 - uneven);
        COMPARE_NEAR(d->uneven->busy, (uneven == 0 ? busy0 : busy1) / seconds);
        COMPARE_NEAR(d->uneven->next_busy, (uneven == 0 ? busy1 : busy0) / seconds);
      }
      const std::vector<std::string> want = expected.isEmpty()
                                                ? std::vector<std::string>{}
                                                : std::vector<std::string>{expected.toStdString()};
      QCOMPARE(d->lines(), want);
    }
    // The table says it under the rows; an uneven layout flags nobody and names no stage slow.
    const std::string table = m.table(table_time(kChangedSteps));
    if (!expected.isEmpty()) VERIFY_CONTAINS(table, expected.toStdString() + "\n");
    QCOMPARE(test::contains(table, "is the bottleneck"), bottleneck >= 0);
    QCOMPARE(test::contains(table, "stages are uneven"), uneven >= 0);
    QVERIFY2(!test::contains(table, "STRAGGLER") && !test::contains(table, "is slow"),
             table.c_str());
  }

  // The baseline is taken when a rank's window first qualifies, not when the diagnosis is asked
  // for: asked at every step (as a replay does), only at the end, or straight from a
  // TimeAccounting, the slowed stage of unevenOrSlowed is named alike. A replay's history
  // (DiagnosisTracker) says "uneven" from the first judged step and the bottleneck once the
  // slowed steps outweigh the baseline's in the window.
  void baselineIsTheFirstJudgedWindow() {
    const std::vector<Hello> hs = hellos(2, 2);
    const Plan plan = changing_stages(0.30, 0.48, 0.30, 0.96, 1.5);
    const std::vector<tl::Event> events = run_events(4, kChangedSteps, plan);
    RunModel every_step, at_end;
    for (const Hello& h : hs) {
      every_step.add(Message{h});
      at_end.add(Message{h});
    }
    test::EventFeeder a(every_step), b(at_end);
    DiagnosisTracker tracker;
    for (const tl::Event& e : events) {
      a.add(e.rank, e.time, e.payload);
      b.add(e.rank, e.time, e.payload);
      if (std::holds_alternative<tl::StepEvent>(e.payload)) tracker.update(every_step);
    }
    for (int r = 0; r < 4; ++r) {
      const std::optional<StepAccount> base = at_end.time().baseline(r);
      QVERIFY(base.has_value());
      QCOMPARE(base->steps, kMinDiagnosisSteps);
      QCOMPARE(base->step, kBaselineStep);
    }
    const Diagnosis direct = account(events, 2).diagnose(places_of(hs));
    for (const Diagnosis* d : {&every_step.diagnosis(), &at_end.diagnosis(), &direct}) {
      QVERIFY2(d->bottleneck.has_value(), text_of(*d));
      QCOMPARE(d->bottleneck->text, every_step.diagnosis().bottleneck->text);
    }
    // The history: uneven (stage 1) at the first judged step, then the bottleneck.
    const std::vector<DiagnosisChange>& changes = tracker.changes();
    QVERIFY2(changes.size() == 2, text_of(every_step.diagnosis()));
    // Once every stage's ranks have their first judged window: the replay looks once per new
    // step, when the first rank reports it.
    QVERIFY(changes[0].step == kBaselineStep || changes[0].step == kChangeStep);
    QCOMPARE(changes[0].lines.size(), size_t{1});
    QVERIFY2(changes[0].lines[0].starts_with("stages are uneven: stage 1 busy 48% against "),
             changes[0].lines[0].c_str());
    QVERIFY(changes[1].step > kBaselineStep && changes[1].step <= kChangedSteps);
    QCOMPARE(changes[1].lines.size(), size_t{1});
    QVERIFY2(changes[1].lines[0].starts_with("stage 1 is the bottleneck: "),
             changes[1].lines[0].c_str());
  }

  // A stage whose ranks have too few steps to be judged is not compared: no verdict on the
  // stages with one stage known.
  void bottleneckNeedsEveryStage() {
    const std::vector<Hello> hs = hellos(2, 2);
    const int64_t enough = kMinDiagnosisSteps + kWarmUpSteps;
    const Plan plan = [](int r, int64_t) { return stages_plan(r, 0.9, 0.3); };
    RunModel m;
    feed(m, hs, run_events({enough + 2, enough + 2, enough - 1, enough - 1}, plan));
    QVERIFY(!m.diagnosis().bottleneck.has_value());
    QVERIFY(!m.diagnosis().uneven.has_value());
    QCOMPARE(m.diagnosis().stages.size(), size_t{1});
    QCOMPARE(m.diagnosis().stages[0].stage, 0);
    COMPARE_NEAR(m.diagnosis().stages[0].busy, 0.9);
    // One more step on stage 1 brings it in: out of balance from the start, so uneven.
    RunModel n;
    feed(n, hs, run_events({enough + 2, enough + 2, enough, enough}, plan));
    QVERIFY(!n.diagnosis().bottleneck.has_value());
    QVERIFY(n.diagnosis().uneven.has_value());
    QCOMPARE(n.diagnosis().uneven->stage, 0);
  }

  // A rank's events after its STEP belong to its next step: open() until that step's STEP;
  // other ranks' events in between change nothing.
  void openStepAfterStep() {
    StepPlan p;
    p.fwd = 0.3;
    p.bwd = 0.4;
    p.opt = 0.1;
    p.seconds = 1.0;
    p.colls = {{"all_reduce", "dp[0]", 0.2, 0.05, 1}};
    RunModel m;
    feed(m, hellos(1, 2), {});
    test::EventFeeder feeder(m);
    TimeAccounting t;
    auto both = [&](const tl::Event& e) {
      feeder.add(e.rank, e.time, e.payload);
      t.add(e, 1);
    };
    const int64_t n1 = kFirst, n2 = kFirst + 1;
    for (const tl::Event& e : step_events(0, n1, p)) both(e);
    // Rank 1's step only partly (forward, backward, all-reduce; no STEP yet), interleaved.
    const std::vector<tl::Event> rank1 = step_events(1, n1, p);
    both(rank1[0]);
    // Rank 0 starts its next step: a forward and an all-reduce where it waits 0.1 s for rank 1.
    const double t2 = kT0 + static_cast<double>(n2) * kStride;
    both(phase_event(0, 0, tl::Phase::forward, t2, t2 + 0.25));
    both(
        make_event(0, t2 + 0.45, collective({"all_reduce", "dp[0]", 0.2, 0.1, 1}, t2 + 0.25, 200)));
    both(rank1[1]);
    both(rank1[2]);

    const std::vector<const TimeAccounting*> accounts{&t, &m.time()};
    for (const TimeAccounting* acc : accounts) {
      Sums one;
      one.step = n1;
      one.steps = 1;
      one.seconds = 1.0;
      one.compute = 0.3 + 0.4 + 0.1;
      one.busy = 0.3 + 0.4;
      one.wait = 0.05;
      one.transfer = 0.2 - 0.05;
      one.collectives = 1;
      one.stage_wait = 0.05;
      one.waited_on[1] = 0.05;
      check_account(acc->window(0), one);
      if (QTest::currentTestFailed()) return;

      const StepAccount* open = acc->open(0);
      QVERIFY(open != nullptr);
      Sums so_far;  // steps 0: not closed
      so_far.compute = 0.25;
      so_far.busy = 0.25;
      so_far.wait = 0.1;
      so_far.transfer = 0.2 - 0.1;
      so_far.collectives = 1;
      so_far.stage_wait = 0.1;
      so_far.waited_on[1] = 0.1;
      check_account(*open, so_far);
      if (QTest::currentTestFailed()) return;

      // Rank 1 has closed nothing yet; its open step has its forward, backward and all-reduce.
      QCOMPARE(acc->window(1).steps, int64_t{0});
      QVERIFY(acc->open(1) != nullptr);
      COMPARE_NEAR(acc->open(1)->compute, 0.3 + 0.4);
      COMPARE_NEAR(acc->open(1)->wait, 0.05);
      QVERIFY(acc->open(5) == nullptr);
    }

    // Rank 0's next STEP (0.75 s) closes it: the window has both steps, nothing is open.
    both(step_event(0, n2, t2 + 0.75, 0.75));
    for (const TimeAccounting* acc : accounts) {
      const StepAccount w = acc->window(0);
      QCOMPARE(w.steps, int64_t{2});
      QCOMPARE(w.step, n2);
      COMPARE_NEAR(w.seconds, 1.0 + 0.75);
      COMPARE_NEAR(w.compute, 0.3 + 0.4 + 0.1 + 0.25);
      COMPARE_NEAR(w.wait, 0.05 + 0.1);
      COMPARE_NEAR(waited_on(w, 1), 0.05 + 0.1);
      QCOMPARE(w.collectives, int64_t{2});
      const StepAccount* open = acc->open(0);
      QVERIFY(open != nullptr);
      QCOMPARE(open->steps, int64_t{0});
      QCOMPARE(open->compute + open->wait + open->transfer + open->unknown, 0.0);
      QCOMPARE(open->collectives, int64_t{0});
      QVERIFY(open->waited_on.empty());
    }
  }

  // Ranks with different step counts: each has its own window; a peer with too few steps to be
  // judged is left out, a straggler with too few is not named.
  void differentStepCounts_data() {
    QTest::addColumn<int>("s0");  // steps reported, the warm-up included
    QTest::addColumn<int>("s1");
    QTest::addColumn<int>("s2");
    QTest::addColumn<int>("s3");
    QTest::addColumn<int>("named");

    QTest::newRow("all 25") << 25 << 25 << 25 << 25 << 2;
    QTest::newRow("rank 3 at 12") << 25 << 25 << 25 << 12 << 2;
    QTest::newRow("rank 3 at 10: not a peer yet") << 25 << 25 << 25 << 10 << 2;
    QTest::newRow("rank 3 only said hello") << 25 << 25 << 25 << 0 << 2;
    QTest::newRow("uneven peers") << 11 << 30 << 25 << 14 << 2;
    QTest::newRow("straggler at 25, ahead of the others") << 12 << 12 << 25 << 12 << 2;
    QTest::newRow("straggler at 10: nobody") << 25 << 25 << 10 << 25 << -1;
    QTest::newRow("straggler only said hello") << 25 << 25 << 0 << 25 << -1;
  }

  void differentStepCounts() {
    QFETCH(int, s0);
    QFETCH(int, s1);
    QFETCH(int, s2);
    QFETCH(int, s3);
    QFETCH(int, named);

    const std::vector<int64_t> steps{s0, s1, s2, s3};
    RunModel m;
    feed(m, hellos(1, 4),
         run_events(steps, [](int r, int64_t) { return suspects(r, 0.375, 0.0, 0.0, 1.0, 1.0); }));
    for (int r = 0; r < 4; ++r) {
      const int64_t reported = steps[static_cast<size_t>(r)];
      const int64_t n = window_steps(reported, 1.0);
      const StepAccount w = m.time().window(r);
      QCOMPARE(w.steps, n);
      QCOMPARE(w.step, n > 0 ? reported : int64_t{0});
      COMPARE_NEAR(w.seconds, static_cast<double>(n) * 1.0);
    }
    if (named < 0) {
      QVERIFY2(!m.diagnosis().straggler.has_value(), text_of(m.diagnosis()));
    } else {
      check_straggler(m.diagnosis(), suspects_expected(steps, 0.375, 0.0, 1.0));
      if (QTest::currentTestFailed()) return;
    }
    for (int r = 0; r < 4; ++r) QCOMPARE(m.straggler(r), r == named);
    // A rank without an accounted step shows "-" for its shares.
    const std::string table = m.table(table_time(30));
    for (int r = 0; r < 4; ++r) {
      const std::vector<std::string> w = words(row_of(table, r));
      QVERIFY2(w.size() > kWaitWord, table.c_str());
      if (steps[static_cast<size_t>(r)] <= kWarmUpSteps) {
        QCOMPARE(w[kCompWord], std::string("-"));
        QCOMPARE(w[kWaitWord], std::string("-"));
      } else {
        QCOMPARE(w[kCompWord], percent(0.125 + 0.25 + 0.0625));
      }
    }
  }

  // Only each rank's own order matters: the straggler run fed rank by rank (each rank's whole
  // run, in reverse rank order) says what the step-by-step feed says.
  void feedOrderDoesNotMatter() {
    constexpr int64_t kSteps = 24;
    const std::vector<tl::Event> by_step = run_events(4, kSteps, straggler_plan);
    std::vector<tl::Event> by_rank;
    for (int r = 3; r >= 0; --r)
      for (int64_t n = 1; n <= kSteps; ++n)
        for (tl::Event& e : step_events(r, n, straggler_plan(r, n))) by_rank.push_back(e);
    QCOMPARE(by_rank.size(), by_step.size());
    const std::vector<Hello> hs = hellos(1, 4);
    RunModel a, b;
    feed(a, hs, by_step);
    feed(b, hs, by_rank);
    for (int r = 0; r < 4; ++r) {
      const StepAccount x = a.time().window(r), y = b.time().window(r);
      QCOMPARE(x.steps, int64_t{20});
      QCOMPARE(y.steps, x.steps);
      QCOMPARE(y.step, x.step);
      QCOMPARE(y.seconds, x.seconds);
      QCOMPARE(y.compute, x.compute);
      QCOMPARE(y.wait, x.wait);
      QCOMPARE(y.transfer, x.transfer);
      QCOMPARE(y.collectives, x.collectives);
      QCOMPARE(y.last, x.last);
      QVERIFY(y.waited_on == x.waited_on);
    }
    QVERIFY(a.diagnosis().straggler.has_value());
    QVERIFY(b.diagnosis().straggler.has_value());
    // The figures; the verdict's history (since when, how many checks) follows the feed order.
    const auto figures = [](const std::string& text) {
      return text.substr(0, text.find("; named"));
    };
    QCOMPARE(figures(b.diagnosis().straggler->text), figures(a.diagnosis().straggler->text));
    QCOMPARE(b.diagnosis().straggler->rank, a.diagnosis().straggler->rank);
    QCOMPARE(a.diagnosis().straggler->steps, int64_t{20});
  }
};

QTEST_GUILESS_MAIN(TestTimeAccounting)
#include "tst_time_accounting.moc"
