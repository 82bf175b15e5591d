#include "engine/hybrid/pipeline_schedule.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "engine/core/error.h"

namespace shardlab {

std::string to_string(const PipelineOp& op) {
  std::string s = fmt::format("{}{}", op.kind == PhaseKind::forward ? 'F' : 'B', op.micro_batch);
  if (op.chunk != 0) s += fmt::format("@{}", op.chunk);
  return s;
}

std::string to_string(const std::vector<PipelineOp>& ops) {
  std::string s;
  for (const PipelineOp& op : ops) {
    if (!s.empty()) s += ' ';
    s += to_string(op);
  }
  return s;
}

PipelineSchedule::~PipelineSchedule() = default;

PipelineSchedule::PipelineSchedule(int stages, int micro_batches, int chunks)
    : stages_(stages), micro_batches_(micro_batches), chunks_(chunks) {
  SL_ENFORCE(stages >= 1, "parallel.pp: must be >= 1, got {}", stages);
  SL_ENFORCE(micro_batches >= 1, "parallel.micro_batches: must be >= 1, got {}", micro_batches);
  SL_ENFORCE(chunks >= 1, "parallel.pp_chunks: must be >= 1, got {}", chunks);
}

void PipelineSchedule::check_stage(int stage) const {
  SL_ENFORCE(stage >= 0 && stage < stages_, "pipeline stage {} outside [0, {})", stage, stages_);
}

GPipeSchedule::GPipeSchedule(int stages, int micro_batches)
    : PipelineSchedule(stages, micro_batches) {}

std::vector<PipelineOp> GPipeSchedule::ops(int stage) const {
  check_stage(stage);
  const int m = micro_batches();
  std::vector<PipelineOp> out;
  out.reserve(size_t(2 * m));
  for (int i = 0; i < m; ++i) out.push_back({PhaseKind::forward, i});
  for (int i = m - 1; i >= 0; --i) out.push_back({PhaseKind::backward, i});
  return out;
}

OneFOneBSchedule::OneFOneBSchedule(int stages, int micro_batches)
    : PipelineSchedule(stages, micro_batches) {}

std::vector<PipelineOp> OneFOneBSchedule::ops(int stage) const {
  check_stage(stage);
  const int m = micro_batches();
  const int warmup = std::min(stages() - stage - 1, m);
  std::vector<PipelineOp> out;
  out.reserve(size_t(2 * m));
  for (int i = 0; i < warmup; ++i) out.push_back({PhaseKind::forward, i});
  for (int i = 0; i < m - warmup; ++i) {
    out.push_back({PhaseKind::forward, warmup + i});
    out.push_back({PhaseKind::backward, i});
  }
  for (int i = m - warmup; i < m; ++i) out.push_back({PhaseKind::backward, i});
  return out;
}

InterleavedOneFOneBSchedule::InterleavedOneFOneBSchedule(int stages, int micro_batches, int chunks)
    : PipelineSchedule(stages, micro_batches, chunks) {
  SL_ENFORCE(chunks >= 2, "parallel.pp_chunks: the interleaved schedule needs >= 2, got {}",
             chunks);
  SL_ENFORCE(micro_batches % stages == 0,
             "parallel.micro_batches: the interleaved schedule needs a multiple of the {} stages, "
             "got {}",
             stages, micro_batches);
}

// Megatron-LM's forward_backward_pipelining_with_interleaving: the k-th forward (backward) of a
// stage walks groups of p micro-batches through the chunks in order (in reverse for backward).
std::vector<PipelineOp> InterleavedOneFOneBSchedule::ops(int stage) const {
  check_stage(stage);
  const int p = stages(), m = micro_batches(), v = chunks();
  const int total = m * v;
  const auto op = [&](int k, PhaseKind kind) {
    const int in_group = k % (p * v);
    int chunk = in_group / p;
    if (kind == PhaseKind::backward) chunk = v - 1 - chunk;
    return PipelineOp{kind, (k / (p * v)) * p + k % p, chunk};
  };
  int warmup = total;  // m == p: every forward first, as Megatron does
  if (m != p) warmup = std::min((p - stage - 1) * 2 + (v - 1) * p, total);
  std::vector<PipelineOp> out;
  out.reserve(size_t(2 * total));
  for (int k = 0; k < warmup; ++k) out.push_back(op(k, PhaseKind::forward));
  for (int k = 0; k < total - warmup; ++k) {
    out.push_back(op(warmup + k, PhaseKind::forward));
    out.push_back(op(k, PhaseKind::backward));
  }
  for (int k = total - warmup; k < total; ++k) out.push_back(op(k, PhaseKind::backward));
  return out;
}

std::unique_ptr<PipelineSchedule> make_schedule(const std::string& name, int stages,
                                                int micro_batches, int chunks) {
  if (name == "gpipe" || name == "1f1b") {
    SL_ENFORCE(chunks == 1, "parallel.pp_chunks: schedule '{}' takes 1 chunk per stage, got {}",
               name, chunks);
    if (name == "gpipe") return std::make_unique<GPipeSchedule>(stages, micro_batches);
    return std::make_unique<OneFOneBSchedule>(stages, micro_batches);
  }
  if (name == "interleaved")
    return std::make_unique<InterleavedOneFOneBSchedule>(stages, micro_batches, chunks);
  SL_THROW(InvalidArgument,
           "parallel.schedule: unknown schedule '{}' (known: gpipe, 1f1b, interleaved)", name);
}

namespace {

// Finish times indexed by (kind, virtual stage, micro-batch); NaN until the op has run.
class Board {
 public:
  Board(int virtual_stages, int micro_batches)
      : vs_(virtual_stages),
        m_(micro_batches),
        t_(size_t(2 * virtual_stages * micro_batches), std::nan("")) {}
  double& at(PhaseKind kind, int vstage, int mb) {
    return t_[size_t(((kind == PhaseKind::forward ? 0 : 1) * vs_ + vstage) * m_ + mb)];
  }

 private:
  int vs_, m_;
  std::vector<double> t_;
};

// Structural checks (everything except deadlock). Returns the first problem, or nullopt.
std::optional<std::string> check_structure(const PipelineSchedule& s,
                                           const std::vector<std::vector<PipelineOp>>& ops) {
  const int p = s.stages(), m = s.micro_batches(), v = s.chunks();
  // count[stage][kind][chunk][mb] and position of each op on its stage
  std::vector<int> count(size_t(p * 2 * v * m), 0), pos(size_t(p * 2 * v * m), -1);
  const auto idx = [&](int st, PhaseKind k, int c, int mb) {
    return size_t(((st * 2 + (k == PhaseKind::forward ? 0 : 1)) * v + c) * m + mb);
  };
  for (int st = 0; st < p; ++st) {
    for (size_t i = 0; i < ops[size_t(st)].size(); ++i) {
      const PipelineOp& op = ops[size_t(st)][i];
      if (op.micro_batch < 0 || op.micro_batch >= m || op.chunk < 0 || op.chunk >= v)
        return fmt::format(
            "stage {} op {} ({}): micro-batch outside [0, {}) or chunk outside [0, {})", st, i,
            to_string(op), m, v);
      const size_t j = idx(st, op.kind, op.chunk, op.micro_batch);
      if (++count[j] > 1) return fmt::format("stage {} runs {} twice", st, to_string(op));
      pos[j] = int(i);
    }
  }
  // Every send has its matching receive: virtual stage k sends F(mb) to k+1, k+1 sends B(mb) to k.
  const int vstages = p * v;
  for (int k = 0; k + 1 < vstages; ++k) {
    const int a = k % p, ca = k / p, b = (k + 1) % p, cb = (k + 1) / p;
    for (int mb = 0; mb < m; ++mb) {
      const bool fa = count[idx(a, PhaseKind::forward, ca, mb)] == 1;
      const bool fb = count[idx(b, PhaseKind::forward, cb, mb)] == 1;
      if (fa != fb)
        return fmt::format("activation of F{} from stage {} to stage {}: {} has no matching {}", mb,
                           a, b, fa ? "send" : "receive", fa ? "receive" : "send");
      const bool ba = count[idx(a, PhaseKind::backward, ca, mb)] == 1;
      const bool bb = count[idx(b, PhaseKind::backward, cb, mb)] == 1;
      if (ba != bb)
        return fmt::format("gradient of B{} from stage {} to stage {}: {} has no matching {}", mb,
                           b, a, bb ? "send" : "receive", bb ? "receive" : "send");
    }
  }
  for (int st = 0; st < p; ++st)
    for (int c = 0; c < v; ++c)
      for (int mb = 0; mb < m; ++mb) {
        const PipelineOp f{PhaseKind::forward, mb, c}, b{PhaseKind::backward, mb, c};
        if (count[idx(st, f.kind, c, mb)] != 1)
          return fmt::format("stage {} never runs {}", st, to_string(f));
        if (count[idx(st, b.kind, c, mb)] != 1)
          return fmt::format("stage {} never runs {}", st, to_string(b));
        if (pos[idx(st, b.kind, c, mb)] < pos[idx(st, f.kind, c, mb)])
          return fmt::format("stage {} runs {} before {}", st, to_string(b), to_string(f));
      }
  return std::nullopt;
}

// Runs the event simulation on a structurally valid schedule; nullopt (and *why) on deadlock.
std::optional<ScheduleTiming> run(const PipelineSchedule& s,
                                  const std::vector<std::vector<PipelineOp>>& ops, double tf,
                                  double tb, std::string* why) {
  const int p = s.stages(), m = s.micro_batches(), v = s.chunks(), vstages = p * v;
  const double df = tf / v, db = tb / v;
  Board done(vstages, m);
  std::vector<size_t> next(size_t(p), 0);
  std::vector<double> clock(size_t(p), 0.0);
  ScheduleTiming t;
  t.busy.assign(size_t(p), 0.0);
  // Start times only depend on finish times, so sweeping the stages until none can move gives the
  // same result as processing events in time order.
  for (bool moved = true; moved;) {
    moved = false;
    for (int st = 0; st < p; ++st) {
      auto& list = ops[size_t(st)];
      while (next[size_t(st)] < list.size()) {
        const PipelineOp& op = list[next[size_t(st)]];
        const int k = op.chunk * p + st;
        double ready = clock[size_t(st)];
        bool ok = true;
        const auto need = [&](PhaseKind kind, int vstage) {
          const double f = done.at(kind, vstage, op.micro_batch);
          if (std::isnan(f))
            ok = false;
          else
            ready = std::max(ready, f);
        };
        if (op.kind == PhaseKind::forward) {
          if (k > 0) need(PhaseKind::forward, k - 1);
        } else {
          need(PhaseKind::forward, k);
          if (k + 1 < vstages) need(PhaseKind::backward, k + 1);
        }
        if (!ok) break;
        const double d = op.kind == PhaseKind::forward ? df : db;
        done.at(op.kind, k, op.micro_batch) = clock[size_t(st)] = ready + d;
        t.busy[size_t(st)] += d;
        ++next[size_t(st)];
        moved = true;
      }
    }
  }
  for (int st = 0; st < p; ++st)
    if (next[size_t(st)] < ops[size_t(st)].size()) {
      if (why)
        *why = fmt::format("deadlock: stage {} waits forever at op {} ({})", st, next[size_t(st)],
                           to_string(ops[size_t(st)][next[size_t(st)]]));
      return std::nullopt;
    }
  t.step_time = *std::max_element(clock.begin(), clock.end());
  double idle = 0;
  for (int st = 0; st < p; ++st) {
    t.idle.push_back(t.step_time - t.busy[size_t(st)]);
    idle += t.idle.back();
  }
  t.bubble_fraction = t.step_time > 0 ? idle / (p * t.step_time) : 0.0;
  return t;
}

std::vector<std::vector<PipelineOp>> all_ops(const PipelineSchedule& s) {
  std::vector<std::vector<PipelineOp>> ops;
  for (int st = 0; st < s.stages(); ++st) ops.push_back(s.ops(st));
  return ops;
}

}  // namespace

ScheduleTiming simulate(const PipelineSchedule& schedule, double t_forward, double t_backward) {
  SL_ENFORCE(std::isfinite(t_forward) && t_forward >= 0,
             "simulate: t_forward must be a finite number >= 0, got {}", t_forward);
  SL_ENFORCE(std::isfinite(t_backward) && t_backward >= 0,
             "simulate: t_backward must be a finite number >= 0, got {}", t_backward);
  const auto ops = all_ops(schedule);
  if (auto problem = check_structure(schedule, ops))
    SL_THROW(InvalidArgument, "schedule '{}' is invalid: {}", schedule.name(), *problem);
  std::string why;
  auto t = run(schedule, ops, t_forward, t_backward, &why);
  if (!t) SL_THROW(InvalidArgument, "schedule '{}' is invalid: {}", schedule.name(), why);
  return *t;
}

bool validate(const PipelineSchedule& schedule, std::string* why) {
  const auto ops = all_ops(schedule);
  if (auto problem = check_structure(schedule, ops)) {
    if (why) *why = *problem;
    return false;
  }
  return run(schedule, ops, 1.0, 1.0, why).has_value();
}

int max_in_flight(const PipelineSchedule& schedule, int stage) {
  int now = 0, most = 0;
  for (const PipelineOp& op : schedule.ops(stage)) {
    now += op.kind == PhaseKind::forward ? 1 : -1;
    most = std::max(most, now);
  }
  return most;
}

int max_in_flight(const PipelineSchedule& schedule, int stage, int chunk) {
  int now = 0, most = 0;
  for (const PipelineOp& op : schedule.ops(stage)) {
    if (op.chunk != chunk) continue;
    now += op.kind == PhaseKind::forward ? 1 : -1;
    most = std::max(most, now);
  }
  return most;
}

double interleaved_bubble_fraction_formula(int stages, int micro_batches, int chunks) {
  SL_ENFORCE(stages >= 1 && micro_batches >= 1 && chunks >= 1,
             "interleaved_bubble_fraction_formula: stages, micro_batches and chunks must be >= 1, "
             "got {}, {} and {}",
             stages, micro_batches, chunks);
  return double(stages - 1) / double(chunks * micro_batches + stages - 1);
}

double bubble_fraction_formula(int stages, int micro_batches) {
  SL_ENFORCE(stages >= 1 && micro_batches >= 1,
             "bubble_fraction_formula: stages and micro_batches must be >= 1, got {} and {}",
             stages, micro_batches);
  return double(stages - 1) / double(micro_batches + stages - 1);
}

}  // namespace shardlab
