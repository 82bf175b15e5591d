// Telemetry events: what a rank tells the outside world about itself. Plain values, no I/O; the
// engine produces them through a TelemetrySink (sink.h), net/ encodes them on the wire
// (net/protocol.h), records them (net/recording.h) and the app draws them.
//
// Times are wall-clock seconds since the Unix epoch (double), so events from ranks on different
// machines line up as well as their clocks do.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "engine/core/memory.h"

namespace shardlab::telemetry {

// One optimizer step as the rank saw it (loss and grad norm are the global figures).
struct StepEvent {
  int64_t step = 0;  // 1-based
  double loss = 0;
  double lr = 0;
  double grad_norm = 0;
  double throughput = 0;  // samples/s, or tokens/s when `tokens`
  bool tokens = false;
  double step_seconds = 0;
};

// The rank's memory ledger: bytes by category (MemCategory order), current and peak.
struct MemoryEvent {
  std::array<int64_t, kMemCategories> current{};
  std::array<int64_t, kMemCategories> peak{};
};

// One completed (or failed) communication operation (engine/comm/comm_record.h).
// What a collective moved (CollectiveEvent::array).
enum class CollectiveArray : uint8_t { unknown = 0, params = 1, grads = 2 };
const char* to_string(CollectiveArray array);

struct CollectiveEvent {
  std::string op;     // "all_reduce", "send", ...
  std::string group;  // "world", "tp[1]", ...
  int64_t bytes = 0;
  double start = 0;     // epoch seconds
  double duration = 0;  // seconds
  double algbw = 0;     // GB/s
  double busbw = 0;     // GB/s
  uint64_t seq = 0;     // the communicator's sequence number
  bool ok = true;
  // Of `duration`, the seconds this rank was blocked waiting for the last rank of the group (a
  // recv: for the peer's message); the rest is transfer. -1: unknown (nccl, send, old
  // recordings). engine/comm/communicator.h, "Waits".
  double wait = -1;
  int32_t last_rank = -1;  // world rank that arrived last (a recv: the sender); -1 none/unknown
  // What it moved, as the strategy said (protocol version 5; engine/comm/comm_record.h,
  // CommSubject): the gradients or parameters of unit `unit` of the rank's LayoutEvent::units.
  // unknown / -1 for everything else (activations, losses, norms) and older recordings.
  CollectiveArray array = CollectiveArray::unknown;
  int32_t unit = -1;
};

// What a rank's compute was doing during a PhaseEvent's span.
enum class Phase : uint8_t { forward = 0, backward = 1, optimizer = 2 };
const char* to_string(Phase phase);

// One span of a rank's compute: the forward or backward of a micro-batch on a pipeline stage
// (stage 0 for the 1-D strategies, which are one stage; with interleaved 1F1B the virtual stage,
// chunk * pp + stage, so its chunk is stage / pp), or a step's optimizer update (on the pipeline
// stage, micro_batch -1). With the collectives' spans these make the app's timeline; the gaps
// between them are idle time.
struct PhaseEvent {
  int32_t stage = 0;
  int32_t micro_batch = 0;
  Phase phase = Phase::forward;
  double start = 0, end = 0;  // epoch seconds
};

// One evaluation on the held-out data (every rank reports the same, global figures).
struct EvalEvent {
  int64_t step = 0;  // optimizer steps done when it ran
  double loss = 0;
  double accuracy = 0;  // fraction of output rows whose argmax is the target
  int64_t samples = 0;
};

// Who holds what (engine/sharding/holdings.h), sent once by each rank when it has set up: the
// full model's flat layout and which of its elements this rank keeps of each kind of array, as
// [begin, end) ranges of the full model's flat indices. Padding is left out of the ranges and
// counted apart. With tensor or pipeline parallelism the ranges are the rank's slice of each
// tensor (a column slice of a row-major matrix is one range per row) and its stage's blocks.
struct LayoutRange {
  int64_t begin = 0, end = 0;
  bool operator==(const LayoutRange&) const = default;
};
struct LayoutTensor {
  std::string name;
  int64_t offset = 0, size = 0;
  bool operator==(const LayoutTensor&) const = default;
};
// The most ranges one list of a LayoutEvent carries (16 bytes each on the wire; the payload limit
// is 1 MiB). A rank with more (a tensor-parallel slice of a very wide model) sends the first
// kMaxLayoutRanges and sets `truncated`.
inline constexpr size_t kMaxLayoutRanges = 16384;
struct LayoutEvent {
  std::string strategy;               // the data-parallel strategy: "ddp", "zero1", "zero2", "fsdp"
  std::vector<LayoutTensor> tensors;  // the full model, in flat order
  std::vector<LayoutRange> params, grads, optimizer_state;
  std::vector<std::string> state_arrays;  // "exp_avg", "exp_avg_sq" (Adam); each is
                                          // optimizer_state long
  int64_t bytes_per_element = 4;          // fp32
  // Elements of padding the rank holds beyond the ranges (ZeRO pads the flat buffer to a multiple
  // of the world size, FSDP every block): in its parameters, gradients and each state array.
  int64_t params_padding = 0, grads_padding = 0, state_padding = 0;
  // The memory planner's steady bytes for this rank (engine/plan/memory/planner.h): params,
  // grads, optimizer_state; and its formula ("zero2: 4*Psi' + 4*Psi'/N + 8*Psi'/N").
  std::array<int64_t, 3> planned{};
  std::string formula;
  bool truncated = false;  // a list was cut at kMaxLayoutRanges
  // The units the rank's data-parallel collectives move (protocol version 5): the gradient
  // buckets of DDP and ZeRO, the blocks of FSDP, each as sorted ranges of the full model's flat
  // indices (a CollectiveEvent's unit indexes this). All units' ranges together are at most
  // kMaxLayoutRanges; units past the cap are left out and `truncated` set.
  std::vector<std::vector<LayoutRange>> units;
};

struct HeartbeatEvent {};

struct LogLineEvent {
  std::string text;  // one line, no newline
};

enum class JobState : uint8_t { starting = 0, running = 1, finished = 2, failed = 3 };
const char* to_string(JobState state);

struct JobStateEvent {
  JobState state = JobState::starting;
  std::string reason;  // why it failed (empty otherwise)
};

using Payload = std::variant<StepEvent, MemoryEvent, CollectiveEvent, PhaseEvent, HeartbeatEvent,
                             LogLineEvent, JobStateEvent, EvalEvent, LayoutEvent>;

struct Event {
  int32_t rank = 0;  // world rank
  uint64_t seq = 0;  // per-rank sequence number, assigned by the publisher (0, 1, 2, ...)
  double time = 0;   // when it happened, epoch seconds
  Payload payload;
};

// Wall-clock now, epoch seconds.
double now_seconds();

}  // namespace shardlab::telemetry
