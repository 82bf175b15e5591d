// Pipeline schedules: the ordered list of (forward | backward, micro-batch[, chunk]) that each
// pipeline stage runs in one training step. Pure logic: no communication, no tensors. The pipeline
// runtime walks ops(stage) in order, receiving an activation before each forward and a gradient
// before each backward from the neighbouring stage; simulate() replays the same dependencies with
// fixed op times.
//
// p stages, m micro-batches. Schedules:
//   gpipe        all m forwards, then all m backwards in reverse micro-batch order B(m-1) .. B0
//                (as GPipe and torch.distributed.pipelining do; any backward order is valid and
//                takes the same time with uniform op times). m micro-batches in flight per stage.
//   1f1b         PipeDream-Flush / Megatron's non-interleaved schedule: stage s runs
//                w = min(p - s - 1, m) warm-up forwards, then (forward, backward) pairs, then the
//                w cool-down backwards; at most p - s micro-batches in flight on stage s.
//   interleaved  Megatron's interleaved 1F1B with v >= 2 model chunks per stage (m divisible by p):
//                chunk c of stage s is virtual stage c * p + s; forwards go through the virtual
//                stages in order, so stage p-1 chunk c sends to stage 0 chunk c+1.
//
// Bubble (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters
// Using Megatron-LM", section 2.2): with uniform forward and backward times t_f, t_b per stage,
// GPipe and 1F1B idle for (p-1)(t_f + t_b) out of a step of (m+p-1)(t_f + t_b), an idle fraction
// of (p-1)/(m+p-1); simulate() reproduces it exactly.
// Interleaving shrinks the bubble time to (p-1)(t_f + t_b)/v.
//
// Example, 1f1b with p = 4, m = 8:
//   stage 0: F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7   (3 warm-up forwards, 4 in flight)
//   stage 3: F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7   (no warm-up, 1 in flight)
//
//   auto sched = make_schedule("1f1b", 4, 8);
//   for (const PipelineOp& op : sched->ops(stage)) ...
//   ScheduleTiming t = simulate(*sched, 1.0, 2.0);  // t.bubble_fraction == 3.0 / 11.0
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace shardlab {

enum class PhaseKind { forward, backward };

struct PipelineOp {
  PhaseKind kind = PhaseKind::forward;
  int micro_batch = 0;
  int chunk = 0;  // model chunk (virtual stage) on this stage; 0 unless interleaved

  bool operator==(const PipelineOp&) const = default;
};

// "F3", "B0"; "F3@1" for chunk 1.
std::string to_string(const PipelineOp& op);
// Ops joined by spaces: "F0 F1 B0 F2 B1 B2".
std::string to_string(const std::vector<PipelineOp>& ops);

class PipelineSchedule {
 public:
  virtual ~PipelineSchedule();
  virtual std::string name() const = 0;
  int stages() const { return stages_; }
  int micro_batches() const { return micro_batches_; }
  int chunks() const { return chunks_; }  // 1 unless interleaved
  // The ops stage runs in one step, in order. Throws InvalidArgument for a stage outside [0, p).
  virtual std::vector<PipelineOp> ops(int stage) const = 0;

 protected:
  // Throws InvalidArgument unless stages, micro_batches and chunks are >= 1.
  PipelineSchedule(int stages, int micro_batches, int chunks = 1);
  void check_stage(int stage) const;

 private:
  int stages_;
  int micro_batches_;
  int chunks_;
};

class GPipeSchedule : public PipelineSchedule {
 public:
  GPipeSchedule(int stages, int micro_batches);
  std::string name() const override { return "gpipe"; }
  std::vector<PipelineOp> ops(int stage) const override;
};

class OneFOneBSchedule : public PipelineSchedule {
 public:
  OneFOneBSchedule(int stages, int micro_batches);
  std::string name() const override { return "1f1b"; }
  std::vector<PipelineOp> ops(int stage) const override;
};

class InterleavedOneFOneBSchedule : public PipelineSchedule {
 public:
  // Throws InvalidArgument unless chunks >= 2 and stages divides micro_batches.
  InterleavedOneFOneBSchedule(int stages, int micro_batches, int chunks);
  std::string name() const override { return "interleaved"; }
  std::vector<PipelineOp> ops(int stage) const override;
};

// "gpipe" | "1f1b" (chunks must be 1) | "interleaved" (chunks >= 2). Throws InvalidArgument for
// an unknown name (the message lists the known ones) or a bad count.
std::unique_ptr<PipelineSchedule> make_schedule(const std::string& name, int stages,
                                                int micro_batches, int chunks = 1);

struct ScheduleTiming {
  double step_time = 0.0;      // when the last stage finishes its last op (the step starts at 0)
  std::vector<double> busy;    // per stage: time spent running ops
  std::vector<double> idle;    // per stage: step_time - busy
  double bubble_fraction = 0;  // sum(idle) / (stages * step_time)
};

// Event simulation with free communication: stage s runs its ops strictly in order; a forward of
// (mb, virtual stage k) starts once virtual stage k-1 finished its forward of mb; a backward once
// virtual stage k+1 finished its backward of mb and this stage finished the forward. t_forward
// and t_backward are one micro-batch's times through a whole stage: each of v chunks takes 1/v.
// Throws InvalidArgument for negative or non-finite times or a schedule validate() rejects.
ScheduleTiming simulate(const PipelineSchedule& schedule, double t_forward, double t_backward);

// True when the schedule is runnable: on every stage each (micro-batch, chunk) appears exactly
// once as a forward and once as a backward, the backward after the forward; every send has its
// matching receive (activations stage s -> s+1, gradients s+1 -> s); and the dependencies do not
// deadlock. Otherwise false with the first problem in *why (when why is not null).
bool validate(const PipelineSchedule& schedule, std::string* why = nullptr);

// The most micro-batches (forwards whose backward has not run) held at once on stage.
int max_in_flight(const PipelineSchedule& schedule, int stage);

// The most forwards of chunk `chunk` held at once on stage (its activation slots).
int max_in_flight(const PipelineSchedule& schedule, int stage, int chunk);

// (p-1)/(v*m+p-1): the idle fraction of interleaved 1F1B with v chunks a stage and uniform op
// times (the bubble time (p-1)(t_f+t_b)/v over a step of m(t_f+t_b) plus it; Narayanan et al.
// 2021, section 2.2).
double interleaved_bubble_fraction_formula(int stages, int micro_batches, int chunks);

// (p-1)/(m+p-1): the idle fraction of GPipe and 1F1B with uniform op times (Narayanan et al.
// 2021, section 2.2).
double bubble_fraction_formula(int stages, int micro_batches);

}  // namespace shardlab
