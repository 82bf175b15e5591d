// What a C++ user brings to a sharded optimizer, for the example custom_model_fsdp.cpp (and the
// test that checks it against the single-process Trainer): their own model, built from the
// engine's layers, and their own base optimizer, a subclass of engine/optim/optimizer.h.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/memory.h"
#include "engine/model/activations.h"
#include "engine/model/layer.h"
#include "engine/model/linear.h"
#include "engine/model/sequential.h"
#include "engine/optim/optimizer.h"

namespace shardlab::example {

// A Fashion-MNIST classifier of three blocks (a block is what FSDP gathers at a time):
// 784 -> Linear 48 + GELU -> Linear 24 + ReLU -> Linear 10.
inline std::vector<std::unique_ptr<Layer>> classifier_blocks() {
  std::vector<std::unique_ptr<Layer>> blocks;
  auto first = std::make_unique<Sequential>("Linear+Gelu");
  first->emplace<Linear>("fc", 784, 48);
  first->emplace<Gelu>("act");
  auto second = std::make_unique<Sequential>("Linear+Relu");
  second->emplace<Linear>("fc", 48, 24);
  second->emplace<Relu>("act");
  blocks.push_back(std::move(first));
  blocks.push_back(std::move(second));
  blocks.push_back(std::make_unique<Linear>(24, 10));
  return blocks;
}

// Heavy-ball momentum: v = beta * v + g; p -= lr * v. Its one state array, "velocity", is kept
// for the range the optimizer is attached to (a sharded optimizer attaches it to the rank's
// shard), and named so that checkpoints can reshard it.
class HeavyBall final : public Optimizer {
 public:
  HeavyBall(double lr, double beta) : Optimizer(config(lr, beta)) {}

  std::vector<std::pair<std::string, std::span<float>>> state() override {
    return {{"velocity", velocity_}};
  }

 protected:
  void allocate_state(int64_t n) override {
    velocity_ = make_buffer(MemCategory::optimizer_state, n);
  }
  void update(std::span<float> params, std::span<const float> grads, double lr) override {
    const auto beta = static_cast<float>(config_.momentum);
    const auto rate = static_cast<float>(lr);
    for (size_t i = 0; i < params.size(); ++i) {
      velocity_[i] = beta * velocity_[i] + grads[i];
      params[i] -= rate * velocity_[i];
    }
  }

 private:
  static OptimizerConfig config(double lr, double beta) {
    OptimizerConfig c;
    c.name = "heavy_ball";
    c.lr = lr;
    c.momentum = beta;
    return c;
  }

  Buffer velocity_;
};

}  // namespace shardlab::example
