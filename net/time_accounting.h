// TimeAccounting: where every rank's time goes, step by step, and who holds the others back.
//
// Each rank's events between two STEPs make one step's account (its own events arrive in order):
//   compute   forward, backward and optimizer PHASE spans
//   busy      forward and backward only (a pipeline stage's work; the optimizer is not part of it)
//   wait      the part of each COLLECTIVE (and recv) spent blocked before the last rank of the
//             group arrived, or the pipeline neighbour's message came (CollectiveEvent::wait)
//   transfer  the rest of each operation's duration
//   unknown   operations whose wait the backend cannot know (nccl, send, old recordings)
// Shares are of the step's seconds (StepEvent::step_seconds). Compute, wait and transfer can add up
// to more than the step when a strategy overlaps communication with compute (bucketed DDP).
//
// The diagnosis looks at each rank's window of recent steps (kWindowSlots below):
//   straggler  the rank the others wait for. Only collectives inside one pipeline stage count (tp,
//              dp, and world when there is no pipeline): a pipeline's own bubble makes stages
//              wait for each other by design. R's peers are the ranks it shares a tp or dp group
//              with (its whole stage when coordinates are unknown). The most blamed rank R of
//              each stage is named when
//              - its peers spent at least kStragglerPeerWait of their step time waiting with R
//                the last to arrive;
//              - that blame is at least kStragglerDominance times any other rank's of the stage,
//                leaving out R's victims when tp and dp are both larger than one (ranks of R's tp
//                or dp group that themselves waited for R that share of their step, and so
//                arrive late to their other group: a slow rank's tp partner is late to its own
//                dp all-reduce);
//              - R's own time per step (its step less all its waiting, a pipeline neighbour's
//                messages included) is at least kStragglerOwnRatio times every peer's, so one of
//                two equally slow ranks (sharing a core) is not named alone.
//              When two stages name one, a rank that waited that share of its step for the
//              other's pipeline messages is its victim and is dropped; of the rest the one whose
//              peers wait most is the straggler. The figures printed: the peers' step time spent
//              waiting for R, R's part of all their waiting, and the share of R's collectives at
//              which it was last (after the first collective of a step the others are already
//              there, so this is well below 100% even for a rank that holds every step up). A
//              step that is slow on every rank (an evaluation, a busy machine) makes nobody wait
//              for anybody, so it names nobody.
//              The verdict holds: once named, a rank stays named on a looser rule
//              (kStragglerHoldShare, most blamed of its stage, its own time the longest), and
//              when that fails too it is kept from memory for kStragglerReleaseChecks checks
//              before it is let go, so a chronic straggler whose figures dip below the rules now
//              and then is not dropped and named again every few dozen steps. settle() moves the
//              verdict on once per slot, from the events alone; the text says since when it is
//              named and at what share of the checks since the full rule held.
//   stages     with pp >= 2, each stage's busy share (forward + backward less the waits at tp
//              collectives inside them, over step time, its ranks together). When the busiest
//              stage's share is at least kBottleneckRatio times the next stage's and
//              kBottleneckMargin above it, the pipeline is out of balance, and the layout baseline
//              says why:
//   baseline   each rank's first judged window (the first window of kMinDiagnosisSteps and
//              kMinDiagnosisSeconds), taken by add() when the rank's window first qualifies, so
//              the verdict is the same whenever diagnose() is called (a live monitor's refresh, a
//              replay's every step). A stage's baseline busy share sums its ranks' baselines. It
//              is what the layout costs, measured on the job itself: a stage's cost by
//              construction (the embedding on the first, the output head and the loss on the
//              last, uneven blocks) differs from CPU to CPU and from one BLAS kernel to another
//              (on an AVX-512 EPYC whose OpenBLAS picks Cooperlake kernels, the last stage of the
//              2-stage gpt job is busy 80% against 61% with nothing slowed), so no threshold on
//              the shares alone can tell a costly stage from a slow one.
//   bottleneck a stage that has become slow: the busiest stage (imbalanced as above) whose share
//              grew against its baseline kBottleneckDrift times as much as the next stage's did
//              ((busy / baseline) >= kBottleneckDrift x (next busy / next baseline)). Named with
//              the baseline's figures.
//   uneven     imbalanced as above, not drifted that far, and the same stage was the busier one
//              in the baseline: the layout is uneven from the start. Said as a property of the
//              layout with what would even it (parallel.pp_partition, moving a block); it names no
//              stage slow and no rank. An imbalance that is neither (the baseline's order
//              reversed, a drift short of kBottleneckDrift) is not yet conclusive: nothing is
//              said.
// Thresholds are judgement, not fits: 10% of a step lost to one rank is what a user would want
// to hear about; twice anyone else's blame keeps the random order of healthy arrivals (every
// rank is last now and then) from naming anybody; 1.1x every peer's own time keeps a rank from
// being named alone when another is as slow. A drift of 1.5x: healthy 2-stage pipelines on 2
// shared cores drifted at most 1.13x from their baseline in 15 runs and 1.26x once in about 40
// (one stage's share moving while the machine was busy), so 1.25x named a healthy stage now and
// then; a stage that became 1.5x slower than its layout made it is what a user must hear about.
// Measured on 2 cores: 4 mpi ranks with nothing slowed name the rank the scheduler serves least
// (its peers wait about a third of their step for it, its own time 1.25x the next rank's): it is
// slow in fact; a rank paused half the time under DDP is named with its peers waiting 22-30% of
// their step for it, own time 1.3x.
//
// Not thread-safe; owned and fed by a RunModel.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/telemetry/events.h"

namespace shardlab::net {

// The window: kWindowSlots full slots and the one still filling. A slot holds at least one step
// and takes further steps until it holds kSlotSeconds of step time. So it covers the last 20 steps
// of a job with steps of 50 ms or more, and the last second or so of a faster one.
inline constexpr size_t kWindowSlots = 20;
inline constexpr double kSlotSeconds = 0.05;
// Steps up to this one are warm-up (allocation, first touches) and not accounted.
inline constexpr int64_t kWarmUpSteps = 1;
inline constexpr double kStragglerPeerWait = 0.10;
inline constexpr double kStragglerDominance = 2.0;
inline constexpr double kStragglerOwnRatio = 1.1;
// Once named, a rank stays named while its peers still wait at least this share of their step for
// it, no other rank of its stage is blamed more, and its own time is still the longest of its
// peers (1x): with more ranks than cores the full rule's 2x dominance and 1.1x own time come and
// go from one window to the next while the rank is slow the whole time (a rank paused every
// 20 ms: its peers waited 19-21% of their step for it, and the verdict switched every few dozen
// steps). Half the naming share: a rank that recovers (its peers wait for it as for anyone, a few
// percent) is let go within a window.
inline constexpr double kStragglerHoldShare = 0.05;
// A named rank that fails the looser rule too is kept from memory for this many checks (two
// windows' worth, about two seconds of a job's time) before it is let go. 4 mpi ranks on 2 cores,
// rank 2's process stopped and continued every 20 ms for 20,000 steps (tests/bench/
// paused_rank_runs.sh): with one window's worth the verdict was let go and named again once or
// twice per run (gaps of about 100 steps where the scheduler served rank 2 well); with two, it
// held from its first naming to the end.
inline constexpr int64_t kStragglerReleaseChecks = 2 * static_cast<int64_t>(kWindowSlots);
inline constexpr double kBottleneckRatio = 1.25;
inline constexpr double kBottleneckMargin = 0.15;
inline constexpr double kBottleneckDrift = 1.5;
// A rank whose window holds fewer steps or seconds than these is not judged yet: the first
// moments of a job (threads starting, caches warming) are uneven without anyone being slow.
inline constexpr int64_t kMinDiagnosisSteps = 10;
inline constexpr double kMinDiagnosisSeconds = 1.0;
// A window of kWindowSlots full slots always qualifies, so a steady job is judged to its last step
// (when the window dropped a full slot for a filling one, the 4-rank demo's last table, with 5 ms
// steps, held 0.995 s now and then and named nobody).
static_assert(static_cast<double>(kWindowSlots) * kSlotSeconds >= kMinDiagnosisSeconds);

// One step of one rank (or a sum of several: seconds and counts add up).
struct StepAccount {
  int64_t step = 0;  // the last step summed
  int64_t steps = 0;
  double seconds = 0;  // step time
  double compute = 0, busy = 0, wait = 0, transfer = 0, unknown = 0;
  // Collectives inside the rank's stage with a known last arrival, and of those, where this rank
  // was last.
  int64_t collectives = 0, last = 0;
  double stage_wait = 0;  // wait at those collectives
  double tp_wait = 0;     // wait at tp collectives (inside forward and backward: not work)
  // Seconds waited at those collectives, by the world rank that arrived last (not this one).
  std::vector<std::pair<int, double>> waited_on;
  // Seconds waited for a pipeline neighbour's messages (recv), by the world rank that sent them.
  std::vector<std::pair<int, double>> fed_by;

  double share(double part) const { return seconds > 0 ? part / seconds : 0.0; }
  void add(const StepAccount& other);
};

// Where a rank sits, for the rules and the words: its pipeline stage and "pp0 tp1 dp2".
struct RankPlace {
  int stage = 0;
  int pp = 1;  // the job's pipeline depth
  std::string coords;
  int tp = -1, dp = -1;  // its tp and dp coordinates; -1 unknown (then its whole stage are peers)
  std::string host{};    // where it runs, when the run spans several hosts ("" otherwise)
};

struct Straggler {
  int rank = -1;
  double last_share = 0;       // of its in-stage collectives, the fraction where it was last
  double peer_wait_share = 0;  // of its peers' step time, spent waiting for it
  double blame_share = 0;      // of its peers' waiting (in-stage collectives), the part for it
  int64_t steps = 0;           // the window the figures cover
  // How sure: the step it was first named at, the checks since (one per slot of step time) and
  // how many of them the full rule passed (the rest held it on the looser one); 0 when not known.
  int64_t named_since = 0, checks = 0, full_rule = 0;
  // "rank 2 (pp0 tp0 dp2) is slow: ...; named since step 120, the full rule held at 87% of the
  // 230 checks since"
  std::string text;
};

struct StageBusy {
  int stage = 0;
  double busy = 0;  // forward + backward over step time, the stage's ranks together
  // The same over its ranks' first judged windows (the layout baseline), ending at baseline_step.
  double baseline = 0;
  int64_t baseline_step = 0;
};

// A stage that became slow: busiest by far, and more so than in the layout baseline.
struct Bottleneck {
  int stage = -1;
  double busy = 0;
  int next_stage = -1;  // the busiest other stage
  double next_busy = 0;
  double baseline = 0, next_baseline = 0;  // the two stages' busy shares in the baseline
  int64_t baseline_step = 0;               // the baseline's last step
  // "stage 1 is the bottleneck: busy 88% against 51% on stage 0 (was 60% against 58% at step 11)"
  std::string text;
};

// A layout whose stages differ in cost by construction: busiest by far, as in the baseline.
struct UnevenStages {
  int stage = -1;
  double busy = 0;
  int next_stage = -1;
  double next_busy = 0;
  // "stages are uneven: stage 1 busy 80% against 61% on stage 0 (it holds the output head and the
  // loss), which parallel.pp_partition=balanced, or moving a block, would even out"
  std::string text;
};

struct Diagnosis {
  std::optional<Straggler> straggler;
  std::optional<Bottleneck> bottleneck;
  std::optional<UnevenStages> uneven;  // never with a bottleneck
  std::vector<StageBusy> stages;       // with pp >= 2
  // The lines a person reads: the straggler's, the bottleneck's and the uneven layout's texts, in
  // that order (none when nothing is to be said). Only the first two name anybody.
  std::vector<std::string> lines() const;
};

class TimeAccounting {
 public:
  // Feeds one event of world rank event.rank (PHASE, COLLECTIVE, STEP; others are ignored); `pp`:
  // the job's pipeline depth (which groups lie inside a stage). True when the ranks have begun as
  // many new slots as there are ranks since the last settle() (about once per slot of step time):
  // the owner then calls settle().
  bool add(const telemetry::Event& event, int pp);
  // Moves the straggler verdict on (when add() says so, so that it depends on the events alone,
  // not on how often diagnose() is asked): a rank the full rule names becomes the verdict;
  // the verdict's rank stays named on the looser rule (kStragglerHoldShare) and is let go when
  // that fails too.
  void settle(const std::map<int, RankPlace>& places);
  // A rank's window (its last kWindowSlots slots) summed (steps == 0 when none).
  StepAccount window(int rank) const;
  // A rank's layout baseline: its first window that qualified for the diagnosis (none before).
  std::optional<StepAccount> baseline(int rank) const;
  // The open step so far (events since the rank's last STEP).
  const StepAccount* open(int rank) const;
  // `places` gives each rank's place (ranks it does not know count as stage 0 of one).
  Diagnosis diagnose(const std::map<int, RankPlace>& places) const;

 private:
  // The windows that qualify for judging, by rank.
  std::map<int, StepAccount> judged_windows() const;
  // The figures of `rank` as a straggler, with no rule applied (a verdict kept from memory).
  std::optional<Straggler> describe_rank(const std::map<int, StepAccount>& win,
                                         const std::map<int, RankPlace>& places, int rank) const;
  // The straggler of `win` (nullopt: nobody), `held` judged on the looser rule (-1: none).
  std::optional<Straggler> pick_straggler(const std::map<int, StepAccount>& win,
                                          const std::map<int, RankPlace>& places, int held) const;

  struct Held {
    int rank = -1;
    int64_t since_step = 0;
    int64_t checks = 0, full_rule = 0;
    int64_t misses = 0;  // consecutive checks that failed the looser rule
  };
  Held held_;
  size_t opened_since_settle_ = 0;  // slots begun since the last settle()
  bool settled_ = false;            // settle() has run: only its verdict names a straggler

  struct PerRank {
    StepAccount open;
    std::deque<StepAccount> closed;  // at most kWindowSlots slots
    // The first window that qualified for the diagnosis (kMinDiagnosisSteps and seconds): the
    // layout baseline (see the top of this file). Once a window qualifies every later one does.
    std::optional<StepAccount> baseline;
  };
  std::map<int, PerRank> ranks_;
};

}  // namespace shardlab::net
