#include "engine/strategies/sharded_optimizer_base.h"

#include <algorithm>
#include <cstring>

#include "engine/core/error.h"
#include "engine/model/model_file.h"
#include "engine/strategies/strategies.h"

namespace shardlab {

namespace {

constexpr uint32_t kStateVersion = 1;

}  // namespace

ShardedOptimizerBase::ShardedOptimizerBase(Communicator& comm, const ShardedOptions& options,
                                           std::unique_ptr<Optimizer> wrapped, const char* name)
    : comm_(comm), options_(options), optimizer_(std::move(wrapped)), name_(name) {
  if (optimizer_) options_.optimizer = optimizer_->config();
}

double ShardedOptimizerBase::step(const Dataset& data, const std::vector<int64_t>& indices,
                                  double lr) {
  return run_step(data, indices, position_.steps_done, lr).loss;
}

TrainResult ShardedOptimizerBase::optimize(const OptimizeInput& input) {
  // The sink is the caller's for this run only: step() outside optimize() publishes nothing.
  struct ResetSink {
    telemetry::TelemetrySink*& sink;
    Slowdown& work;
    ~ResetSink() {
      sink = nullptr;
      work = {};
    }
  } reset{telemetry_, slowdown_};
  telemetry_ = input.telemetry;
  slowdown_ = input.slowdown;
  // Every rank of a data-parallel replica reads the same slice of each global batch.
  const Topology& topo = topology();
  TrainResult result = position_.run(
      input, options_, topo.coord(rank()).dp, topo.dp(), name_,
      [this, &input](const std::vector<int64_t>& indices, int64_t step, double lr) {
        return run_step(*input.train, indices, step, lr);
      },
      [this](const Dataset& data, int64_t max_samples) { return evaluate(data, max_samples); });
  result.params = gather_params();
  return result;
}

void ShardedOptimizerBase::finish_step(double grad_norm) {
  last_grad_norm_ = grad_norm;
  ++position_.steps_done;
  if (const MemoryLedger* ledger = current_ledger()) steady_memory_ = ledger->snapshot();
}

TrainingProgress ShardedOptimizerBase::progress() const {
  return position_.progress(*optimizer_);
}

void ShardedOptimizerBase::restore_progress(const TrainingProgress& p) {
  position_.restore(p, *optimizer_);
}

void ShardedOptimizerBase::save_model(const std::string& path) {
  const std::vector<float> full = gather_params();
  parallel_detail::write_model_file_collective(comm_, path, full_layout(), full);
}

std::vector<uint8_t> ShardedOptimizerBase::serialize() {
  const std::vector<uint8_t> state = optimizer_->serialize();
  const std::span<const float> held = held_params();
  const TrainingProgress p = progress();
  ByteWriter w(held.size() * 4 + state.size() + 256);
  w.bytes(state_format().magic, 8);
  w.pod(kStateVersion);
  write_state_header(w);
  w.pod(p.steps_done);
  w.pod(static_cast<uint8_t>(p.has_sampler));
  w.pod(p.sampler.epoch);
  w.pod(p.sampler.index);
  w.pod(p.early.best);
  w.pod(p.early.without_gain);
  w.pod(p.early.seen);
  w.pod(static_cast<uint8_t>(p.early.stop));
  w.floats(held);
  w.pod(static_cast<int64_t>(state.size()));
  w.bytes(state.data(), state.size());
  w.checksum();
  return std::move(w.out());
}

void ShardedOptimizerBase::deserialize(std::span<const uint8_t> bytes) {
  const StateFormat format = state_format();
  const char* what = format.what;
  ByteReader r(bytes, what);
  r.verify_checksum();
  const uint8_t* m = r.take(8, "magic");
  SL_ENFORCE_T(FormatError, std::memcmp(m, format.magic, 8) == 0,
               "{}: not a ShardLab {} (bad magic)", what, what);
  const auto version = r.pod<uint32_t>("version");
  SL_ENFORCE_T(FormatError, version == kStateVersion,
               "{}: format version {} is not supported (this build reads version {})", what,
               version, kStateVersion);
  check_state_header(r);
  TrainingProgress p;
  p.steps_done = r.pod<int64_t>("steps");
  p.has_sampler = r.pod<uint8_t>("sampler flag") != 0;
  p.sampler.epoch = r.pod<int64_t>("sampler epoch");
  p.sampler.index = r.pod<int64_t>("sampler index");
  p.early.best = r.pod<double>("best eval");
  p.early.without_gain = r.pod<int64_t>("evals without gain");
  p.early.seen = r.pod<int64_t>("evals seen");
  p.early.stop = r.pod<uint8_t>("early stop") != 0;
  const std::span<float> held = held_params();
  Buffer params = make_buffer(MemCategory::comm, static_cast<int64_t>(held.size()));
  r.floats(params, "held parameters");
  const auto n = r.pod<int64_t>("optimizer state length");
  SL_ENFORCE_T(FormatError, n >= 0 && static_cast<size_t>(n) == r.left(),
               "{}: optimizer state length {} does not match the {} bytes left", what, n, r.left());
  const uint8_t* state = r.take(static_cast<size_t>(n), "optimizer state");
  // Everything checked; the optimizer checks its own bytes before changing anything.
  optimizer_->deserialize(std::span<const uint8_t>(state, static_cast<size_t>(n)));
  std::copy(params.begin(), params.end(), held.begin());
  p.optimizer_steps = optimizer_->steps();  // as deserialize() just set it
  position_.restore(p, *optimizer_);
}

void ShardedOptimizerBase::view_held_and_state(CheckpointView& v, Device& device,
                                               DeviceSpan<float> held) {
  if (device.kind() == DeviceKind::cpu) {
    v.held = {host_address(device, held.data()), held.size()};
    v.state = optimizer_->state();
    return;
  }
  struct Staging {
    std::vector<float> held;
    std::vector<std::vector<float>> state;
  };
  auto staging = std::make_shared<Staging>();
  staging->held.resize(held.size());
  device.copy_to_host(DeviceSpan<const float>(held), std::span<float>(staging->held));
  const auto arrays = optimizer_->device_state();
  for (const auto& [name, array] : arrays) {
    staging->state.emplace_back(array.size());
    device.copy_to_host(DeviceSpan<const float>(array), std::span<float>(staging->state.back()));
  }
  v.held = staging->held;
  for (size_t i = 0; i < arrays.size(); ++i)
    v.state.emplace_back(arrays[i].first, staging->state[i]);
  Device* dev = &device;
  v.store = [staging, arrays, held, dev] {
    dev->copy_from_host(std::span<const float>(staging->held), held);
    for (size_t i = 0; i < arrays.size(); ++i)
      dev->copy_from_host(std::span<const float>(staging->state[i]), arrays[i].second);
  };
  v.staging = staging;
}

}  // namespace shardlab
