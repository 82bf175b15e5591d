// The optimizer-update cases that the CUDA kernel checks (engine/doctor/kernel_checks.h, run by
// `shardlab doctor` and tst_kernels_cuda) and the CPU bf16 suite (tst_kernels_bf16) sweep: each op
// variant with fixed hyperparameters, random data, and one dispatch that builds the op's Args from
// plain pointers, so the CPU and the CUDA side run exactly the same updates (host or device
// pointers alike). Header-only; needs only kernels/cpu.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/adagrad_update.h"
#include "kernels/cpu/adam_update.h"
#include "kernels/cpu/rmsprop_update.h"
#include "kernels/cpu/sgd_update.h"

namespace shardlab::doctor::updates {

enum class Op { sgd, sgd_momentum, sgd_nesterov, adam, adamw, rmsprop, rmsprop_momentum, adagrad };

inline const std::vector<Op>& all_ops() {
  static const std::vector<Op> ops{Op::sgd,   Op::sgd_momentum, Op::sgd_nesterov,     Op::adam,
                                   Op::adamw, Op::rmsprop,      Op::rmsprop_momentum, Op::adagrad};
  return ops;
}

inline std::string op_name(Op op) {
  switch (op) {
    case Op::sgd:
      return "sgd";
    case Op::sgd_momentum:
      return "sgd_momentum";
    case Op::sgd_nesterov:
      return "sgd_nesterov";
    case Op::adam:
      return "adam";
    case Op::adamw:
      return "adamw";
    case Op::rmsprop:
      return "rmsprop";
    case Op::rmsprop_momentum:
      return "rmsprop_momentum";
    case Op::adagrad:
      return "adagrad";
  }
  return "?";
}

// Host state of one update: param, grad and up to two state buffers (s1: momentum / exp_avg /
// square_avg / sum, s2: exp_avg_sq / rmsprop's momentum buffer).
struct HostState {
  std::vector<float> param, grad, s1, s2;
  std::vector<uint16_t> bf16;
};

inline HostState make_state(Op op, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  HostState s;
  const auto size = static_cast<std::size_t>(n);
  s.param.resize(size);
  s.grad.resize(size);
  for (auto& v : s.param) v = u(rng);
  // Adagrad's accumulator starts at PyTorch-style initial_accumulator_value 0.1; the others at 0.
  s.s1.assign(size, op == Op::adagrad ? 0.1f : 0.0f);
  s.s2.assign(size, 0.0f);
  s.bf16.assign(size, 0);
  return s;
}

// A fresh gradient for step `step` (the same on every run for the same seed).
inline void fill_grad(std::vector<float>& grad, uint32_t seed, int64_t step) {
  std::mt19937 rng(seed * 7919u + static_cast<uint32_t>(step));
  std::normal_distribution<float> d(0.0f, 0.5f);
  for (auto& v : grad) v = d(rng);
}

struct Buffers {
  float* param;
  const float* grad;
  float* s1;
  float* s2;
  uint16_t* bf16;  // null: fp32 only
  int64_t n;
};

// Calls run(args) with the Args of `op` at 1-based `step`; Run overloads operator() for each
// Args type.
template <class Run>
void dispatch(Op op, const Buffers& b, int64_t step, Run&& run) {
  switch (op) {
    case Op::sgd:
    case Op::sgd_momentum:
    case Op::sgd_nesterov: {
      kernels::SgdArgs a;
      a.param = b.param;
      a.grad = b.grad;
      a.momentum_buf = op == Op::sgd ? nullptr : b.s1;
      a.n = b.n;
      a.lr = 0.05;
      a.momentum = op == Op::sgd ? 0.0 : 0.9;
      a.weight_decay = 0.01;
      a.nesterov = op == Op::sgd_nesterov;
      a.param_bf16 = b.bf16;
      run(a);
      return;
    }
    case Op::adam:
    case Op::adamw: {
      kernels::AdamArgs a;
      a.param = b.param;
      a.grad = b.grad;
      a.exp_avg = b.s1;
      a.exp_avg_sq = b.s2;
      a.n = b.n;
      a.lr = 1e-2;
      a.weight_decay = op == Op::adamw ? 0.1 : 0.01;
      a.decoupled = op == Op::adamw;
      a.step = step;
      a.param_bf16 = b.bf16;
      run(a);
      return;
    }
    case Op::rmsprop:
    case Op::rmsprop_momentum: {
      kernels::RmspropArgs a;
      a.param = b.param;
      a.grad = b.grad;
      a.square_avg = b.s1;
      a.momentum_buf = op == Op::rmsprop ? nullptr : b.s2;
      a.n = b.n;
      a.lr = 1e-2;
      a.momentum = op == Op::rmsprop ? 0.0 : 0.9;
      a.weight_decay = 0.01;
      a.param_bf16 = b.bf16;
      run(a);
      return;
    }
    case Op::adagrad: {
      kernels::AdagradArgs a;
      a.param = b.param;
      a.grad = b.grad;
      a.sum = b.s1;
      a.n = b.n;
      a.lr = 0.05;
      a.weight_decay = 0.01;
      a.param_bf16 = b.bf16;
      run(a);
      return;
    }
  }
}

struct CpuRun {
  void operator()(const kernels::SgdArgs& a) const { kernels::sgd_update(a); }
  void operator()(const kernels::AdamArgs& a) const { kernels::adam_update(a); }
  void operator()(const kernels::RmspropArgs& a) const { kernels::rmsprop_update(a); }
  void operator()(const kernels::AdagradArgs& a) const { kernels::adagrad_update(a); }
};

// `steps` CPU updates of s (grads from fill_grad with `seed`), with or without the bf16 copy.
inline void cpu_steps(Op op, HostState& s, uint32_t seed, int64_t steps, bool bf16) {
  for (int64_t t = 1; t <= steps; ++t) {
    fill_grad(s.grad, seed, t);
    dispatch(op,
             Buffers{s.param.data(), s.grad.data(), s.s1.data(), s.s2.data(),
                     bf16 ? s.bf16.data() : nullptr, static_cast<int64_t>(s.param.size())},
             t, CpuRun{});
  }
}

}  // namespace shardlab::doctor::updates
