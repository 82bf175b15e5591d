#include "net/time_accounting.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace shardlab::net {

namespace {

// A collective whose waits say who is slow: inside one stage (tp, dp; world without a pipeline),
// never a point-to-point transfer.
bool in_stage(const telemetry::CollectiveEvent& c, int pp) {
  if (c.op == "send" || c.op == "recv") return false;
  if (c.group.starts_with("tp[") || c.group.starts_with("dp[")) return true;
  return c.group == "world" && pp <= 1;
}

void add_waited(std::vector<std::pair<int, double>>& waited, int rank, double seconds) {
  for (auto& [r, s] : waited)
    if (r == rank) {
      s += seconds;
      return;
    }
  waited.emplace_back(rank, seconds);
}

StepAccount window_of(const std::deque<StepAccount>& slots) {
  StepAccount sum;
  for (const StepAccount& s : slots) sum.add(s);
  return sum;
}

// A window long enough to be judged.
bool qualifies(const StepAccount& w) {
  return w.steps >= kMinDiagnosisSteps && w.seconds >= kMinDiagnosisSeconds;
}

// A stage's busy share: forward and backward less the tp waits inside them, over step time.
double busy_share(const StepAccount& w) {
  return w.share(std::max(0.0, w.busy - w.tp_wait));
}

// What a stage holds besides its blocks, for the uneven layout's words.
std::string holds(int stage, int pp) {
  if (stage == 0) return "the embedding";
  if (stage == pp - 1) return "the output head and the loss";
  return "its blocks";
}

double finite_or_zero(double x) {
  return std::isfinite(x) && x > 0 ? x : 0.0;
}

// Rank `culprit`, blamed for `most` seconds of its stage peers' waiting (the next rank of its
// stage for `second`): the straggler when the rules of time_accounting.h hold.
// full: the rule that names a rank; held: the looser one that keeps a named rank named;
// describe: no rule, the figures of a verdict kept from memory.
enum class JudgeMode { full, held, describe };

std::optional<Straggler> judge(int culprit, double most, double second,
                               const std::map<int, StepAccount>& win,
                               const std::map<int, RankPlace>& places, JudgeMode mode) {
  auto place_of = [&](int rank) {
    auto it = places.find(rank);
    return it == places.end() ? RankPlace{} : it->second;
  };
  const int stage = place_of(culprit).stage;
  // Own time: a step's seconds not spent waiting for anyone (collectives and a pipeline
  // neighbour's messages alike), per step.
  auto own = [](const StepAccount& w) {
    return w.steps > 0 ? (w.seconds - w.wait) / static_cast<double>(w.steps) : 0.0;
  };
  double peer_seconds = 0, peer_wait = 0, peer_own = 0;
  int peers = 0;
  const RankPlace mine_place = place_of(culprit);
  // Peers: the ranks of its tp and dp groups (the whole stage when coordinates are unknown).
  auto peer = [&](int q) {
    const RankPlace p = place_of(q);
    if (q == culprit || p.stage != stage) return false;
    if (mine_place.tp < 0 || mine_place.dp < 0 || p.tp < 0 || p.dp < 0) return true;
    return p.tp == mine_place.tp || p.dp == mine_place.dp;
  };
  for (const auto& [q, w] : win) {
    if (!peer(q)) continue;
    ++peers;
    peer_seconds += w.seconds;
    peer_wait += w.stage_wait;
    peer_own = std::max(peer_own, own(w));
  }
  const StepAccount& mine = win.at(culprit);
  const double share = peer_seconds > 0 ? most / peer_seconds : 0.0;
  // A rank already named stays named on the looser rule (see kStragglerHoldShare); a verdict
  // held from memory is described with its figures, whatever they are.
  const bool held = mode == JudgeMode::held;
  const double min_share = held ? kStragglerHoldShare : kStragglerPeerWait;
  const double dominance = held ? 1.0 : kStragglerDominance;
  const double own_ratio = held ? 1.0 : kStragglerOwnRatio;
  if (peers > 0 &&
      (mode == JudgeMode::describe ||
       (share >= min_share && most >= dominance * second && own(mine) >= own_ratio * peer_own))) {
    Straggler s;
    s.rank = culprit;
    s.last_share = mine.collectives > 0
                       ? static_cast<double>(mine.last) / static_cast<double>(mine.collectives)
                       : 0.0;
    s.peer_wait_share = share;
    s.blame_share = peer_wait > 0 ? std::min(1.0, most / peer_wait) : 0.0;
    s.steps = mine.steps;
    const RankPlace place = place_of(culprit);
    s.text = fmt::format(
        "rank {}{}{} is slow: its peers waited {:.0f}% of their step time for it, {:.0f}% of all "
        "their waiting (last {} steps; it arrived last at {:.0f}% of its collectives)",
        culprit, place.coords.empty() ? "" : " (" + place.coords + ")",
        place.host.empty() ? "" : " on " + place.host, 100 * s.peer_wait_share,
        100 * s.blame_share, s.steps, 100 * s.last_share);
    return s;
  }
  return std::nullopt;
}

}  // namespace

void StepAccount::add(const StepAccount& o) {
  step = std::max(step, o.step);
  steps += o.steps;
  seconds += o.seconds;
  compute += o.compute;
  busy += o.busy;
  wait += o.wait;
  transfer += o.transfer;
  unknown += o.unknown;
  collectives += o.collectives;
  last += o.last;
  stage_wait += o.stage_wait;
  tp_wait += o.tp_wait;
  for (const auto& [r, s] : o.waited_on) add_waited(waited_on, r, s);
  for (const auto& [r, s] : o.fed_by) add_waited(fed_by, r, s);
}

std::vector<std::string> Diagnosis::lines() const {
  std::vector<std::string> out;
  if (straggler) out.push_back(straggler->text);
  if (bottleneck) out.push_back(bottleneck->text);
  if (uneven) out.push_back(uneven->text);
  return out;
}

bool TimeAccounting::add(const telemetry::Event& event, int pp) {
  bool opened = false;
  if (std::holds_alternative<telemetry::HeartbeatEvent>(event.payload) ||
      std::holds_alternative<telemetry::LogLineEvent>(event.payload) ||
      std::holds_alternative<telemetry::MemoryEvent>(event.payload))
    return false;
  PerRank& r = ranks_[event.rank];
  StepAccount& a = r.open;
  if (const auto* p = std::get_if<telemetry::PhaseEvent>(&event.payload)) {
    const double s = finite_or_zero(p->end - p->start);
    a.compute += s;
    if (p->phase != telemetry::Phase::optimizer) a.busy += s;
  } else if (const auto* c = std::get_if<telemetry::CollectiveEvent>(&event.payload)) {
    const double d = finite_or_zero(c->duration);
    if (!(c->wait >= 0)) {
      a.unknown += d;
      return false;
    }
    const double w = std::min(finite_or_zero(c->wait), d);
    a.wait += w;
    a.transfer += d - w;
    if (c->group.starts_with("tp[")) a.tp_wait += w;
    if (c->op == "recv" && c->last_rank >= 0 && c->last_rank != event.rank && w > 0)
      add_waited(a.fed_by, c->last_rank, w);
    if (!in_stage(*c, pp) || c->last_rank < 0) return false;
    ++a.collectives;
    a.stage_wait += w;
    if (c->last_rank == event.rank)
      ++a.last;
    else if (w > 0)
      add_waited(a.waited_on, c->last_rank, w);
  } else if (const auto* s = std::get_if<telemetry::StepEvent>(&event.payload)) {
    a.step = s->step;
    a.steps = 1;
    a.seconds = finite_or_zero(s->step_seconds);
    // The first step pays for allocation and first touches, unevenly across ranks: not steady
    // state, so not evidence.
    if (s->step > kWarmUpSteps) {
      // A slot takes steps until it holds kSlotSeconds, so fast steps still give a window long
      // enough that one scheduler hiccup is a small part of it.
      if (r.closed.empty() || r.closed.back().seconds >= kSlotSeconds) {
        r.closed.push_back(std::move(a));
        opened = true;
      } else
        r.closed.back().add(a);
      // kWindowSlots full slots and the one still filling: dropping a full slot for the one that
      // has just begun would leave the window short of kWindowSlots * kSlotSeconds, and a rank
      // whose slot is filling when the job ends would not be judged at all.
      const size_t keep = kWindowSlots + (r.closed.back().seconds < kSlotSeconds ? 1 : 0);
      while (r.closed.size() > keep) r.closed.pop_front();
      // The layout baseline: the first window the diagnosis would judge.
      if (!r.baseline) {
        StepAccount w = window_of(r.closed);
        if (qualifies(w)) r.baseline = std::move(w);
      }
    }
    a = StepAccount{};
  }
  // One settle per round of slots (as many new slots as ranks): a verdict moves on at the pace
  // of the job, and a large job (1,024 ranks) is not judged once per rank per slot.
  if (opened && ++opened_since_settle_ >= ranks_.size()) return true;
  return false;
}

void TimeAccounting::settle(const std::map<int, RankPlace>& places) {
  opened_since_settle_ = 0;
  settled_ = true;
  const std::map<int, StepAccount> win = judged_windows();
  // The held rank on the looser rule, anyone else on the full one.
  const std::optional<Straggler> now = pick_straggler(win, places, held_.rank);
  if (now && now->rank == held_.rank) {
    held_.misses = 0;
    ++held_.checks;
    const std::optional<Straggler> full = pick_straggler(win, places, -1);
    if (full && full->rank == held_.rank) ++held_.full_rule;
  } else if (now) {  // the full rule names another rank (or the first)
    held_ = Held{};
    held_.rank = now->rank;
    held_.since_step = win.at(now->rank).step;
    held_.checks = held_.full_rule = 1;
  } else if (held_.rank >= 0) {
    // Not even the looser rule: kept from memory for a window's worth of checks, then let go.
    ++held_.checks;
    if (++held_.misses >= kStragglerReleaseChecks) held_ = Held{};
  }
}

std::optional<Straggler> TimeAccounting::describe_rank(const std::map<int, StepAccount>& win,
                                                       const std::map<int, RankPlace>& places,
                                                       int rank) const {
  auto place_of = [&](int r) {
    auto it = places.find(r);
    return it == places.end() ? RankPlace{} : it->second;
  };
  const int stage = place_of(rank).stage;
  double most = 0;
  for (const auto& [q, w] : win)
    for (const auto& [r, sec] : w.waited_on)
      if (r == rank && q != rank && place_of(q).stage == stage) most += sec;
  return judge(rank, most, 0.0, win, places, JudgeMode::describe);
}

StepAccount TimeAccounting::window(int rank) const {
  auto it = ranks_.find(rank);
  return it == ranks_.end() ? StepAccount{} : window_of(it->second.closed);
}

std::optional<StepAccount> TimeAccounting::baseline(int rank) const {
  auto it = ranks_.find(rank);
  return it == ranks_.end() ? std::nullopt : it->second.baseline;
}

const StepAccount* TimeAccounting::open(int rank) const {
  auto it = ranks_.find(rank);
  return it == ranks_.end() ? nullptr : &it->second.open;
}

std::map<int, StepAccount> TimeAccounting::judged_windows() const {
  std::map<int, StepAccount> win;
  for (const auto& [rank, _] : ranks_) {
    StepAccount w = window(rank);
    if (qualifies(w)) win.emplace(rank, std::move(w));
  }
  return win;
}

std::optional<Straggler> TimeAccounting::pick_straggler(const std::map<int, StepAccount>& win,
                                                        const std::map<int, RankPlace>& places,
                                                        int held) const {
  std::optional<Straggler> out;
  auto place_of = [&](int rank) {
    auto it = places.find(rank);
    return it == places.end() ? RankPlace{} : it->second;
  };
  // Straggler: blame each rank by the waits its stage peers spent on it, and judge the most
  // blamed rank of each stage against the next one of that stage (a late stage-1 rank whose
  // input came late from a slow stage-0 rank must not hide the stage-0 rank).
  std::map<int, std::map<int, double>> blame;  // stage -> rank -> seconds
  for (const auto& [q, w] : win)
    for (const auto& [r, s] : w.waited_on)
      if (r != q && place_of(r).stage == place_of(q).stage) blame[place_of(r).stage][r] += s;
  // Lateness moves from group to group only when a rank is in two groups of several ranks: tp
  // and dp both larger than one (known from the coordinates). Then a rank in the culprit's tp
  // group can be late to its own dp group because of it, and the other way round.
  bool tp_many = false, dp_many = false;
  for (const auto& [rank, p] : places) {
    tp_many = tp_many || p.tp > 0;
    dp_many = dp_many || p.dp > 0;
  }
  const bool two_groups = tp_many && dp_many;
  auto share_group = [&](int q, int r) {
    const RankPlace a = place_of(q), b = place_of(r);
    return a.stage == b.stage && a.tp >= 0 && b.tp >= 0 && (a.tp == b.tp || a.dp == b.dp);
  };
  // Seconds rank q waited for rank r in its window.
  auto waited_for = [&](int q, int r) {
    for (const auto& [who, s] : win.at(q).waited_on)
      if (who == r) return s;
    return 0.0;
  };
  std::vector<Straggler> named;  // one per stage at most
  for (const auto& [stage, by_rank] : blame) {
    int culprit = -1;
    double most = 0;
    for (const auto& [r, b] : by_rank)
      if (b > most) {
        most = b;
        culprit = r;
      }
    if (culprit < 0 || win.count(culprit) == 0) continue;
    // The next most blamed rank, leaving out the culprit's victims: a rank that itself waited
    // for the culprit a kStragglerPeerWait share of its step arrives late elsewhere because of it
    // (in 3D, a slow rank's tp partner is late to its own dp all-reduce).
    double second = 0;
    for (const auto& [r, b] : by_rank) {
      if (r == culprit) continue;
      auto it = win.find(r);
      if (two_groups && it != win.end() && share_group(r, culprit) &&
          it->second.share(waited_for(r, culprit)) >= kStragglerPeerWait)
        continue;
      second = std::max(second, b);
    }
    if (std::optional<Straggler> s = judge(culprit, most, second, win, places,
                                           culprit == held ? JudgeMode::held : JudgeMode::full))
      named.push_back(std::move(*s));
  }
  // A stage's straggler that waited for another's pipeline messages is that one's victim.
  auto fed_by = [&](int q, int r) {
    for (const auto& [who, s] : win.at(q).fed_by)
      if (who == r) return s;
    return 0.0;
  };
  for (const Straggler& s : named) {
    const bool victim = std::any_of(named.begin(), named.end(), [&](const Straggler& o) {
      return o.rank != s.rank && win.at(s.rank).share(fed_by(s.rank, o.rank)) >= kStragglerPeerWait;
    });
    if (!victim && (!out || s.peer_wait_share > out->peer_wait_share)) out = s;
  }
  return out;
}

Diagnosis TimeAccounting::diagnose(const std::map<int, RankPlace>& places) const {
  Diagnosis d;
  auto place_of = [&](int rank) {
    auto it = places.find(rank);
    return it == places.end() ? RankPlace{} : it->second;
  };
  const std::map<int, StepAccount> win = judged_windows();
  // The verdict settle() keeps (the held rank, described with this window's figures); an
  // accounting never settled (no owner moving a verdict on) applies the full rule to this window.
  // Once settled, only settle() names: a rank the full rule names between two checks, and not
  // at them, would otherwise come and go with how often the diagnosis is asked for.
  if (held_.rank >= 0 && win.count(held_.rank) > 0) {
    d.straggler = describe_rank(win, places, held_.rank);
    if (d.straggler && held_.checks > 0) {
      d.straggler->named_since = held_.since_step;
      d.straggler->checks = held_.checks;
      d.straggler->full_rule = held_.full_rule;
      d.straggler->text += fmt::format(
          "; named since step {}, the full rule held at {:.0f}% of the {} checks since",
          held_.since_step,
          100.0 * static_cast<double>(held_.full_rule) / static_cast<double>(held_.checks),
          held_.checks);
    }
  } else if (!settled_) {
    d.straggler = pick_straggler(win, places, -1);
  }

  // Pipeline stages: busy share per stage, the stage's ranks together, now and in the layout
  // baseline (their first judged windows).
  int pp = 1;
  for (const auto& [rank, _] : win) pp = std::max(pp, place_of(rank).pp);
  if (pp >= 2) {
    std::map<int, StepAccount> stages, bases;
    std::map<int, bool> based;  // every judged rank of the stage has its baseline
    for (const auto& [rank, w] : win) {
      const int stage = place_of(rank).stage;
      stages[stage].add(w);
      const std::optional<StepAccount> b = ranks_.at(rank).baseline;
      auto [it, fresh] = based.emplace(stage, b.has_value());
      if (!fresh) it->second = it->second && b.has_value();
      if (b) bases[stage].add(*b);
    }
    for (const auto& [stage, w] : stages) {
      const StepAccount& b = bases[stage];
      d.stages.push_back(
          {stage, busy_share(w), based[stage] ? busy_share(b) : 0.0, based[stage] ? b.step : 0});
    }
    if (static_cast<int>(d.stages.size()) == pp) {
      auto by_busy = d.stages;
      std::stable_sort(by_busy.begin(), by_busy.end(),
                       [](const StageBusy& a, const StageBusy& b) { return a.busy > b.busy; });
      const StageBusy& top = by_busy[0];
      const StageBusy& next = by_busy[1];
      const bool imbalanced =
          top.busy >= kBottleneckRatio * next.busy && top.busy - next.busy >= kBottleneckMargin;
      // The top stage's growth against its baseline, kBottleneckDrift times the next one's:
      // top / top_base >= drift * next / next_base, multiplied out (a baseline may be zero).
      const bool have_baseline = based[top.stage] && based[next.stage];
      const bool drifted =
          have_baseline && top.busy * next.baseline >= kBottleneckDrift * next.busy * top.baseline;
      if (imbalanced && drifted) {
        Bottleneck b;
        b.stage = top.stage;
        b.busy = top.busy;
        b.next_stage = next.stage;
        b.next_busy = next.busy;
        b.baseline = top.baseline;
        b.next_baseline = next.baseline;
        b.baseline_step = std::max(top.baseline_step, next.baseline_step);
        b.text = fmt::format(
            "stage {} is the bottleneck: busy {:.0f}% against {:.0f}% on stage {} (was {:.0f}% "
            "against {:.0f}% at step {})",
            top.stage, 100 * top.busy, 100 * next.busy, next.stage, 100 * top.baseline,
            100 * next.baseline, b.baseline_step);
        d.bottleneck = std::move(b);
      } else if (imbalanced && have_baseline && top.baseline > next.baseline) {
        UnevenStages u;
        u.stage = top.stage;
        u.busy = top.busy;
        u.next_stage = next.stage;
        u.next_busy = next.busy;
        u.text = fmt::format(
            "stages are uneven: stage {} busy {:.0f}% against {:.0f}% on stage {} (it holds {}), "
            "which parallel.pp_partition=balanced, or moving a block, would even out",
            top.stage, 100 * top.busy, 100 * next.busy, next.stage, holds(top.stage, pp));
        d.uneven = std::move(u);
      }
    }
  }
  return d;
}

}  // namespace shardlab::net
