#include "engine/plan/search.h"

#include <algorithm>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "engine/core/error.h"

namespace shardlab::plan {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

std::vector<int> divisors(int64_t n) {
  std::vector<int> d;
  for (int64_t i = 1; i <= n; ++i)
    if (n % i == 0) d.push_back(static_cast<int>(i));
  return d;
}

template <typename T>
std::vector<T> choices(const std::optional<T>& fixed, std::vector<T> all) {
  return fixed ? std::vector<T>{*fixed} : all;
}

bool better(const Estimate& a, const Estimate& b) {
  if (a.fits != b.fits) return a.fits;
  if (a.fits) {
    if (a.step_seconds != b.step_seconds) return a.step_seconds < b.step_seconds;
    return a.memory.total() < b.memory.total();
  }
  return a.memory.total() < b.memory.total();
}

bool same_but_recompute(const Layout& a, const Layout& b) {
  return a.pp == b.pp && a.tp == b.tp && a.dp == b.dp && a.micro_batch == b.micro_batch &&
         a.zero == b.zero && a.sequence_parallel == b.sequence_parallel &&
         a.interleave == b.interleave;
}

std::string explain(const Estimate& e, const std::vector<Estimate>& all, const ClusterSpec& c) {
  const Layout& l = e.layout;
  std::vector<std::string> parts;
  if (l.tp == 1)
    parts.push_back("no tensor parallelism");
  else if (l.tp == c.gpus_per_node)
    parts.push_back(
        fmt::format("tp {} keeps every tensor-parallel all-reduce inside a node", l.tp));
  else
    parts.push_back(fmt::format("tp {} inside a node", l.tp));
  if (l.pp > 1) {
    // Against fewer stages: the least memory they need, and the fastest of them that fits.
    const Estimate* least = nullptr;
    const Estimate* fastest = nullptr;
    for (const Estimate& o : all)
      if (o.layout.pp < l.pp) {
        if (!least || o.memory.total() < least->memory.total()) least = &o;
        if (o.fits && (!fastest || o.step_seconds < fastest->step_seconds)) fastest = &o;
      }
    if (least && !fastest)
      parts.push_back(
          fmt::format("pp {} because fewer stages do not fit (pp {}: {:.0f} GiB at "
                      "least)",
                      l.pp, least->layout.pp, least->memory.total() / kGiB));
    else if (fastest && fastest->step_seconds > e.step_seconds)
      parts.push_back(fmt::format("pp {}: fewer stages are slower (pp {}: {:.2f} s at best)", l.pp,
                                  fastest->layout.pp, fastest->step_seconds));
    else
      parts.push_back(fmt::format("pp {}", l.pp));
  }
  if (l.dp > 1)
    parts.push_back(l.zero > 0 ? fmt::format("dp {} with ZeRO-{}", l.dp, l.zero)
                               : fmt::format("dp {}", l.dp));
  if (l.recompute != Recompute::none)
    for (const Estimate& o : all)
      if (o.layout.recompute == Recompute::none && same_but_recompute(o.layout, l) && !o.fits) {
        parts.push_back(fmt::format("{} recomputation because without it {:.0f} GiB",
                                    recompute_name(l.recompute), o.memory.total() / kGiB));
        break;
      }
  parts.push_back(fmt::format("{:.0f} of {:.0f} GiB{}", e.memory.total() / kGiB,
                              c.gpu.hbm_bytes / kGiB, e.fits ? "" : ": does not fit"));
  if (l.pp > 1)
    parts.push_back(
        fmt::format("bubble {:.0f}%{}", 100 * e.time.bubble / e.step_seconds,
                    l.interleave > 1 ? fmt::format(" (interleaved x{})", l.interleave) : ""));
  return fmt::format("{}", fmt::join(parts, "; "));
}

}  // namespace

PlanResult search_plans(const PlanJob& job, const ClusterSpec& c, const SearchOptions& o) {
  check_shape(job.model);
  // Messages name the quantities, not a front end's spelling of them (--tp, tp=).
  SL_ENFORCE(job.gpus >= 1 && job.gpus <= (1 << 20), "the GPUs must number 1 to {}, got {}",
             1 << 20, job.gpus);
  SL_ENFORCE(job.global_batch >= 1, "the global batch must be positive, got {}", job.global_batch);
  for (const auto& [name, fixed] : {std::pair{"tp", o.tp}, {"pp", o.pp}, {"dp", o.dp}})
    SL_ENFORCE(!fixed || (*fixed >= 1 && job.gpus % *fixed == 0),
               "{} {} does not divide the {} GPUs", name, fixed.value_or(0), job.gpus);
  std::vector<int64_t> micro;
  for (int64_t b = 1; b <= o.max_micro_batch; b *= 2) micro.push_back(b);
  std::vector<int> inter;
  for (int v = 1; v <= o.max_interleave; ++v) inter.push_back(v);
  std::vector<Estimate> all;
  std::string first_problem;
  PlanResult r;
  const std::vector<int> gpu_divisors = divisors(job.gpus);
  for (int t : choices(o.tp, divisors(std::min<int64_t>(job.gpus, c.gpus_per_node))))
    for (int p : choices(o.pp, gpu_divisors))
      for (int d : choices(o.dp, gpu_divisors))
        // pp x tp x dp must make the GPUs: skip the rest of the loops early.
        if (static_cast<int64_t>(p) * t * d == job.gpus)
          for (int64_t b : choices(o.micro_batch, micro))
            for (int v : choices(o.interleave, inter))
              for (int z : choices(o.zero, {0, 1, 2, 3}))
                for (Recompute rc :
                     choices(o.recompute, {Recompute::none, Recompute::selective, Recompute::full}))
                  for (bool sp : choices(o.sequence_parallel, {false, true})) {
                    if (!o.sequence_parallel && sp && t == 1) continue;
                    const Layout l{p, t, d, b, z, rc, sp, v};
                    const std::string problem = layout_problem(job, c, l);
                    if (!problem.empty()) {
                      if (first_problem.empty()) first_problem = problem;
                      continue;
                    }
                    all.push_back(estimate(job, c, l));
                  }
  if (all.empty()) {
    SL_ENFORCE(!first_problem.empty(), "no layout of pp x tp x dp makes {} GPUs with these choices",
               job.gpus);
    SL_THROW(InvalidArgument, "no layout can run this job: {}", first_problem);
  }
  r.searched = static_cast<int64_t>(all.size());
  std::sort(all.begin(), all.end(), better);
  r.any_fits = all.front().fits;
  // The best of each (pp, tp, dp, micro-batch): the alternatives a person would weigh.
  std::set<std::tuple<int, int, int, int64_t>> seen;
  for (const Estimate& e : all) {
    if (r.plans.size() >= o.top) break;
    if (!seen.insert({e.layout.pp, e.layout.tp, e.layout.dp, e.layout.micro_batch}).second)
      continue;
    r.plans.push_back(e);
    r.why.push_back(explain(e, all, c));
  }
  return r;
}

}  // namespace shardlab::plan
