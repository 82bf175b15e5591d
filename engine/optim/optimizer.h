// Optimizer: a base optimizer that updates one contiguous index range of a model's flat
// parameters and holds state for that range only. A sharded strategy attaches it to the shard its
// rank owns; a single process attaches it to the whole buffer. Nothing here knows about sharding.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/param_layout.h"
#include "engine/device/device.h"
#include "engine/optim/optimizer_config.h"

namespace shardlab {

class Optimizer {
 public:
  explicit Optimizer(OptimizerConfig config) : config_(std::move(config)) {}
  virtual ~Optimizer() = default;

  const std::string& name() const { return config_.name; }
  const OptimizerConfig& config() const { return config_; }

  // Allocates zeroed state for the flat range [range.begin, range.end) on `device` (which must
  // outlive the optimizer) and resets the step count.
  void attach(IndexRange range, Device& device = host_device());
  IndexRange range() const { return range_; }
  // The device attach() was given (InternalError before attach()).
  Device& device() const;

  // One update of the attached range, on the device the optimizer is attached on. params and
  // grads hold exactly range().size() elements there (element i is flat index range().begin + i).
  // lr is this step's rate, schedule applied.
  void step(DeviceSpan<float> params, DeviceSpan<const float> grads, double lr);
  // The same over host memory, for an optimizer attached on the host (cpu) device.
  void step(std::span<float> params, std::span<const float> grads, double lr);

  // Updates done since attach (Adam's bias correction uses it).
  int64_t steps() const { return steps_; }
  // Sets the step count, for a checkpoint that restores state() array by array.
  void restore_steps(int64_t steps);

  // Named per-element state arrays (e.g. "exp_avg", "exp_avg_sq"), each range().size() long, on
  // the host: for an optimizer attached on the host (cpu) device. Checkpoints and resharding read
  // and write state through these.
  virtual std::vector<std::pair<std::string, std::span<float>>> state() = 0;
  // The names of state()'s arrays, in its order, on any device.
  virtual std::vector<std::string> state_names();
  // The same arrays on the optimizer's device (on cpu: state() itself).
  virtual std::vector<std::pair<std::string, DeviceSpan<float>>> device_state();
  int64_t state_bytes();

  // Name, hyper-parameters, range, step count and state, as bytes. deserialize() checks that the
  // bytes are well formed and were written by the same optimizer kind for the same range, and
  // throws FormatError / InvalidArgument naming what differs; nothing is changed on failure.
  std::vector<uint8_t> serialize();
  void deserialize(std::span<const uint8_t> bytes);

 protected:
  // Size the state arrays for n elements on device(), zero-filled (or the optimizer's initial
  // value).
  virtual void allocate_state(int64_t n) = 0;
  // The update itself on device(); steps() already counts this step (1 on the first call). The
  // default runs update() on the host, so an optimizer written as a host loop (the custom model
  // example's) runs on the cpu device.
  virtual void update_on_device(DeviceSpan<float> params, DeviceSpan<const float> grads, double lr);
  // A host-loop update (cpu device only); the registry's optimizers use update_on_device.
  virtual void update(std::span<float> params, std::span<const float> grads, double lr);

  OptimizerConfig config_;

 private:
  IndexRange range_;
  Device* device_ = nullptr;
  int64_t steps_ = 0;
};

// Builds the optimizer named by config.name (its registry.h entry); throws InvalidArgument for an
// unknown name (listing the known ones) or a hyper-parameter out of range.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config);
// The registry's names, in its order: "sgd", "adam", "adamw", "rmsprop", "adagrad".
const std::vector<std::string>& optimizer_names();

}  // namespace shardlab
