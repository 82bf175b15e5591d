#include "engine/bench/cpu_op_calibration.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "engine/bench/harness.h"
#include "engine/comm/threads/world.h"
#include "engine/core/rng.h"
#include "engine/train/step_math.h"
#include "kernels/cpu/activation.h"
#include "kernels/cpu/adagrad_update.h"
#include "kernels/cpu/adam_update.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/layer_norm.h"
#include "kernels/cpu/rmsprop_update.h"
#include "kernels/cpu/sgd_update.h"
#include "kernels/cpu/softmax_xent.h"

namespace shardlab {
namespace {

using plan::CpuOp;

constexpr int kReps = 7;

// Median seconds of one call of `work`, repeated inside each timing until it lasts about
// `min_seconds` (so a microsecond kernel is not timed by the clock's resolution).
double median_seconds(const std::function<void()>& work, double min_seconds = 5e-4) {
  const double once = bench::best(bench::time_each(1, 3, work));
  const int inner = std::max(1, static_cast<int>(min_seconds / std::max(once, 1e-9)));
  const std::vector<double> t = bench::time_each(0, kReps, [&] {
    for (int i = 0; i < inner; ++i) work();
  });
  return bench::median(t) / inner;
}

void measure_gemm(plan::CpuOpCosts& c) {
  c.gemm_sizes = {16, 64, 256, 1024};
  const int64_t big = c.gemm_sizes.back();
  std::vector<float> a(big * big, 0.5f), b(big * big, 0.25f), out(big * big, 0.0f);
  for (int64_t m : c.gemm_sizes)
    for (int64_t n : c.gemm_sizes)
      for (int64_t k : c.gemm_sizes) {
        const double s = median_seconds([&] {
          kernels::gemm(kernels::Trans::No, kernels::Trans::No, m, n, k, 1.0f, a.data(), k,
                        b.data(), n, 0.0f, out.data(), n);
        });
        c.gemm_gflops.push_back(2.0 * m * n * k / s / 1e9);
      }
}

void measure_elementwise(plan::CpuOpCosts& c) {
  constexpr int64_t rows = 4096, cols = 256, n = rows * cols;
  std::vector<float> x(n), y(n), z(n), w(n), v(n), g(n, 1e-3f), row(cols, 1.0f), rowb(cols, 0.0f),
      rstd(rows), dw(cols), db(cols);
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>((i * 37) % 101) * 0.02f - 1.0f;
  std::vector<int32_t> ids(rows), targets(rows);
  for (int64_t i = 0; i < rows; ++i) ids[i] = static_cast<int32_t>(i % cols), targets[i] = ids[i];
  std::vector<double> row_loss(rows);
  std::vector<float> table(cols * cols, 0.1f), pos(64 * cols, 0.1f), dtable(cols * cols),
      dpos(64 * cols);
  const auto set = [&](CpuOp op, int64_t elements, const std::function<void()>& work) {
    c.ns_per_element[static_cast<size_t>(op)] =
        median_seconds(work) * 1e9 / static_cast<double>(elements);
  };
  set(CpuOp::add, n, [&] { kernels::add(x.data(), y.data(), z.data(), n); });
  set(CpuOp::bias_add, n, [&] { kernels::bias_add(y.data(), row.data(), rows, cols); });
  set(CpuOp::bias_grad, n, [&] { kernels::bias_grad(x.data(), db.data(), rows, cols); });
  set(CpuOp::relu_forward, n, [&] { kernels::relu_forward(x.data(), y.data(), n); });
  set(CpuOp::relu_backward, n, [&] { kernels::relu_backward(y.data(), x.data(), z.data(), n); });
  set(CpuOp::gelu_forward, n, [&] { kernels::gelu_forward(x.data(), y.data(), w.data(), n); });
  set(CpuOp::gelu_backward, n,
      [&] { kernels::gelu_backward(x.data(), w.data(), y.data(), z.data(), n); });
  set(CpuOp::layer_norm_forward, n, [&] {
    kernels::layer_norm_forward(x.data(), row.data(), rowb.data(), y.data(), w.data(), rstd.data(),
                                rows, cols, 1e-5f);
  });
  set(CpuOp::layer_norm_backward, n, [&] {
    kernels::layer_norm_backward(x.data(), w.data(), rstd.data(), row.data(), z.data(), dw.data(),
                                 db.data(), rows, cols);
  });
  set(CpuOp::xent_forward, n, [&] {
    kernels::softmax_xent_forward(x.data(), targets.data(), y.data(), row_loss.data(), nullptr,
                                  rows, cols);
  });
  set(CpuOp::xent_backward, n, [&] {
    kernels::softmax_xent_backward(y.data(), targets.data(), z.data(), rows, cols, 1.0f / rows);
  });
  set(CpuOp::embedding_forward, n, [&] {
    kernels::embedding_forward(ids.data(), table.data(), pos.data(), y.data(), rows, 64, cols);
  });
  set(CpuOp::embedding_backward, n, [&] {
    kernels::embedding_backward(ids.data(), x.data(), dtable.data(), dpos.data(), rows, 64, cols);
  });
  set(CpuOp::adam, n, [&] {
    kernels::AdamArgs a;
    a.param = y.data(), a.grad = g.data(), a.exp_avg = w.data(), a.exp_avg_sq = v.data();
    a.n = n, a.lr = 1e-3, a.weight_decay = 0.1, a.decoupled = true;
    kernels::adam_update(a);
  });
  set(CpuOp::sgd, n, [&] {
    kernels::SgdArgs a;
    a.param = y.data(), a.grad = g.data(), a.momentum_buf = w.data(), a.n = n, a.lr = 1e-2;
    a.momentum = 0.9, a.weight_decay = 5e-4, a.nesterov = true;
    kernels::sgd_update(a);
  });
  set(CpuOp::rmsprop, n, [&] {
    kernels::RmspropArgs a;
    a.param = y.data(), a.grad = g.data(), a.square_avg = w.data(), a.n = n, a.lr = 1e-3;
    kernels::rmsprop_update(a);
  });
  set(CpuOp::adagrad, n, [&] {
    kernels::AdagradArgs a;
    a.param = y.data(), a.grad = g.data(), a.sum = w.data(), a.n = n, a.lr = 1e-2;
    kernels::adagrad_update(a);
  });
  set(CpuOp::zero, n, [&] { std::memset(z.data(), 0, n * sizeof(float)); });
  set(CpuOp::copy, n, [&] { std::memcpy(z.data(), x.data(), n * sizeof(float)); });
  double sink = 0;
  set(CpuOp::grad_norm, n, [&] { sink += squared_norm(std::span<const float>(x.data(), n)); });
  x[0] = static_cast<float>(sink > 0 ? 0.0 : 1.0);
  // 64 random rows of 784 bytes from 32 MiB, through a 256-entry table (as the image datasets
  // normalise their pixels).
  constexpr int64_t features = 784, rows_in_set = (int64_t{32} << 20) / features, batch = 64;
  std::vector<uint8_t> pixels(static_cast<size_t>(rows_in_set * features));
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i * 131);
  std::array<float, 256> lut{};
  for (int i = 0; i < 256; ++i) lut[static_cast<size_t>(i)] = static_cast<float>(i) / 255.0f;
  Rng rng(7);
  set(CpuOp::gather, batch * features, [&] {
    float* dst = z.data();
    for (int64_t r = 0; r < batch; ++r) {
      const uint8_t* src =
          pixels.data() + static_cast<int64_t>(rng.next_u64() % rows_in_set) * features;
      for (int64_t k = 0; k < features; ++k) dst[k] = lut[src[k]];
      dst += features;
    }
  });
}

// The attention kernel besides its GEMMs: its measured time less the GEMMs' share by the grid.
void measure_attention(plan::CpuOpCosts& c) {
  const kernels::AttentionDims d{8, 128, 4, 32};
  const int64_t B = d.batch, T = d.steps, H = d.heads, D = d.head_dim, C = d.width();
  std::vector<float> qkv(B * T * 3 * C), probs(B * H * T * T), att(B * T * C), datt(B * T * C),
      dqkv(B * T * 3 * C), dscores(T * T);
  for (size_t i = 0; i < qkv.size(); ++i) qkv[i] = static_cast<float>(i % 17) * 0.01f;
  for (size_t i = 0; i < datt.size(); ++i) datt[i] = static_cast<float>(i % 13) * 0.001f;
  const double s = median_seconds([&] {
    kernels::causal_attention_forward(d, qkv.data(), probs.data(), att.data());
    kernels::causal_attention_backward(d, qkv.data(), probs.data(), datt.data(), dqkv.data(),
                                       dscores.data());
  });
  const double gemms =
      static_cast<double>(B * H) * (2 * c.gemm_seconds(T, T, D) + 4 * c.gemm_seconds(T, D, T));
  c.ns_per_element[static_cast<size_t>(CpuOp::attention_softmax)] =
      std::max(0.0, s - gemms) * 1e9 / static_cast<double>(B * H * T * T);
}

constexpr int kSyncGemms = 20, kSyncIters = 400, kSyncReps = 5;

void sync_work() {
  static thread_local std::vector<float> a(64 * 64, 0.5f), b(64 * 64, 0.25f), out(64 * 64);
  for (int g = 0; g < kSyncGemms; ++g)
    kernels::gemm(kernels::Trans::No, kernels::Trans::No, 64, 64, 64, 1.0f, a.data(), 64, b.data(),
                  64, 0.0f, out.data(), 64);
}

// The threads backend at 1, 2 and 4 ranks per core.
void measure_sync(plan::CpuOpCosts& c, int cores) {
  const double work = median_seconds(sync_work);
  for (int per_core : {1, 2, 4}) {
    const int ranks = std::max(2, per_core * cores);
    std::vector<double> t;
    run_threads(ranks, CommOptions{}, [&](Communicator& world) {
      const double s = paired_meetings_seconds(world);
      if (world.rank() == 0) t.push_back(s);
    });
    c.sync.push_back(sync_cost(t.front(), work, ranks, cores));
  }
}

// A transformer layer's kernels, forward and backward, on this thread's own buffers (rows 2048,
// width 128, MLP 512, 256 classes), and what the costs measured above say it takes.
class LayerSequence {
 public:
  static constexpr int64_t R = 2048, C = 128, F = 512, V = 256;
  LayerSequence()
      : x_(R * C, 0.1f),
        y_(R * C),
        xhat_(R * C),
        dx_(R * C),
        h_(R * F),
        g_(R * F),
        t_(R * F),
        dh_(R * F),
        o_(R * C),
        w1_(F * C, 0.01f),
        w2_(C * F, 0.01f),
        dw_(F * C),
        logits_(R * V),
        probs_(R * V),
        rstd_(R),
        wc_(C, 1.0f),
        bc_(C),
        bf_(F),
        loss_(R),
        targets_(R) {
    for (int64_t i = 0; i < R; ++i) targets_[static_cast<size_t>(i)] = static_cast<int32_t>(i % V);
    for (size_t i = 0; i < x_.size(); ++i) x_[i] = static_cast<float>(i % 29) * 0.03f - 0.4f;
  }
  void run() {
    using kernels::Trans;
    kernels::layer_norm_forward(x_.data(), wc_.data(), bc_.data(), y_.data(), xhat_.data(),
                                rstd_.data(), R, C, 1e-5f);
    kernels::gemm(Trans::No, Trans::Yes, R, F, C, 1.0f, y_.data(), C, w1_.data(), C, 0.0f,
                  h_.data(), F);
    kernels::bias_add(h_.data(), bf_.data(), R, F);
    std::memcpy(t_.data(), h_.data(), sizeof(float) * R * F);
    kernels::gelu_forward(h_.data(), g_.data(), t_.data(), R * F);
    kernels::gemm(Trans::No, Trans::Yes, R, C, F, 1.0f, g_.data(), F, w2_.data(), F, 0.0f,
                  o_.data(), C);
    kernels::add(x_.data(), o_.data(), y_.data(), R * C);
    kernels::gemm(Trans::No, Trans::Yes, R, V, C, 1.0f, y_.data(), C, w1_.data(), C, 0.0f,
                  logits_.data(), V);
    kernels::softmax_xent_forward(logits_.data(), targets_.data(), probs_.data(), loss_.data(),
                                  nullptr, R, V);
    kernels::softmax_xent_backward(probs_.data(), targets_.data(), logits_.data(), R, V, 1.0f / R);
    kernels::gemm(Trans::No, Trans::No, R, C, V, 1.0f, logits_.data(), V, w1_.data(), C, 0.0f,
                  dx_.data(), C);
    kernels::gemm(Trans::Yes, Trans::No, C, F, R, 1.0f, dx_.data(), C, g_.data(), F, 1.0f,
                  dw_.data(), F);
    kernels::gemm(Trans::No, Trans::No, R, F, C, 1.0f, dx_.data(), C, w2_.data(), F, 0.0f,
                  dh_.data(), F);
    kernels::gelu_backward(h_.data(), t_.data(), dh_.data(), g_.data(), R * F);
    kernels::bias_grad(g_.data(), bf_.data(), R, F);
    kernels::gemm(Trans::Yes, Trans::No, F, C, R, 1.0f, g_.data(), F, y_.data(), C, 1.0f,
                  dw_.data(), C);
    kernels::gemm(Trans::No, Trans::No, R, C, F, 1.0f, g_.data(), F, w1_.data(), C, 0.0f, o_.data(),
                  C);
    kernels::layer_norm_backward(o_.data(), xhat_.data(), rstd_.data(), wc_.data(), dx_.data(),
                                 bc_.data(), bc_.data(), R, C);
    kernels::add(dx_.data(), o_.data(), y_.data(), R * C);
  }
  static double predicted(const plan::CpuOpCosts& c) {
    const auto n = [](int64_t a, int64_t b) { return static_cast<double>(a * b); };
    return c.seconds(CpuOp::layer_norm_forward, n(R, C)) + c.gemm_seconds(R, F, C) +
           c.seconds(CpuOp::bias_add, n(R, F)) + c.seconds(CpuOp::copy, n(R, F)) +
           c.seconds(CpuOp::gelu_forward, n(R, F)) + c.gemm_seconds(R, C, F) +
           c.seconds(CpuOp::add, n(R, C)) + c.gemm_seconds(R, V, C) +
           c.seconds(CpuOp::xent_forward, n(R, V)) + c.seconds(CpuOp::xent_backward, n(R, V)) +
           c.gemm_seconds(R, C, V) + c.gemm_seconds(C, F, R) + c.gemm_seconds(R, F, C) +
           c.seconds(CpuOp::gelu_backward, n(R, F)) + c.seconds(CpuOp::bias_grad, n(R, F)) +
           c.gemm_seconds(F, C, R) + c.gemm_seconds(R, C, F) +
           c.seconds(CpuOp::layer_norm_backward, n(R, C)) + c.seconds(CpuOp::add, n(R, C));
  }

 private:
  std::vector<float> x_, y_, xhat_, dx_, h_, g_, t_, dh_, o_, w1_, w2_, dw_, logits_, probs_, rstd_,
      wc_, bc_, bf_;
  std::vector<double> loss_;
  std::vector<int32_t> targets_;
};

// The layer sequence alone on one thread, then on 1, 2 and 4 threads per core at once (no
// meetings): the seconds a core spends per sequence over the predicted sum.
void measure_in_step(plan::CpuOpCosts& c, int cores) {
  const double predicted = LayerSequence::predicted(c);
  constexpr int reps = 4;
  {
    LayerSequence s;
    if (cores > 1)
      c.in_step.push_back({1.0 / cores, median_seconds([&] { s.run(); }, 0.05) / predicted});
  }
  for (int per_core : {1, 2, 4}) {
    const int threads = per_core * cores;
    std::vector<double> t;
    for (int rep = 0; rep < 5; ++rep)
      run_threads(threads, CommOptions{}, [&](Communicator& world) {
        LayerSequence s;
        s.run();  // warm-up: first touch of the buffers
        world.barrier();
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < reps; ++i) s.run();
        world.barrier();
        if (world.rank() == 0)
          t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      });
    c.in_step.push_back(
        {static_cast<double>(per_core), bench::median(t) / (per_core * reps) / predicted});
  }
}

}  // namespace

double sync_work_seconds() {
  return median_seconds(sync_work);
}

double paired_meetings_seconds(Communicator& world) {
  std::unique_ptr<Communicator> pair = world.split(world.rank() / 2, world.rank(), "pair");
  std::vector<float> v(4, 1.0f);
  const auto body = [&](int n) {
    for (int i = 0; i < n; ++i) {
      sync_work();
      if (pair->size() > 1) pair->all_reduce(v, ReduceOp::Avg);
    }
  };
  body(kSyncIters / 10);  // warm-up
  std::vector<double> t;
  for (int rep = 0; rep < kSyncReps; ++rep) {
    world.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    body(kSyncIters);
    world.barrier();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return bench::median(t);
}

plan::CpuOpCosts::Sync sync_cost(double wall, double work, int ranks, int cores) {
  // Each core runs max(1, ranks / cores) ranks' work and meetings.
  const double share = std::max(1.0, static_cast<double>(ranks) / cores);
  return {std::max(1.0, static_cast<double>(ranks) / cores),
          std::max(0.0, wall - kSyncIters * work * share) / (kSyncIters * share)};
}

plan::CpuOpCosts measure_cpu_ops(int cores) {
  plan::CpuOpCosts c;
  measure_gemm(c);
  measure_elementwise(c);
  measure_attention(c);
  measure_sync(c, cores);
  measure_in_step(c, cores);
  return c;
}

}  // namespace shardlab
