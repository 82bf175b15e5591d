// Tensor parallelism (engine/tensor_parallel) against the plain single-process GPT: for tp in
// {1, 2, 4}, ranks as threads, each rank builds its blocks with build_tp_gpt_block, loads its
// slice of the reference model's parameters, and the vocab-parallel loss, accuracy count, logit
// columns and reassembled gradients must match the reference's (SoftmaxCrossEntropy, count_correct,
// Model::backward). Also: the slicing round trip and coverage, the key-bias gradient rule, and bad
// input (a tp that does not divide the heads, out-of-range ids, a missing communicator).
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "engine/comm/threads/world.h"
#include "engine/core/error.h"
#include "engine/core/memory.h"
#include "engine/model/cross_entropy.h"
#include "engine/model/model.h"
#include "engine/tensor_parallel/tp_gpt.h"
#include "engine/tensor_parallel/tp_group.h"
#include "engine/tensor_parallel/tp_slicing.h"
#include "engine/tensor_parallel/vocab_cross_entropy.h"
#include "kernels/cpu/gemm.h"
#include "tests/common/caught.h"

using namespace shardlab;

using shardlab::test::caught;

namespace {

// One forward and backward, no optimizer step: the tp ranks split dot products and the plain GPT
// does not, so results differ only by summation order, relative errors of n u scale (n <= 64
// terms here, u = 2^-24, times a small condition number). Seen at most 7.8e-7 (gradients) under
// eight OpenBLAS kernels (Prescott, Core2, Atom, Nehalem, Sandybridge, Haswell, Zen, SkylakeX);
// 1e-5 leaves 13 times that, while a wrong slice, a missing all-reduce or a gradient counted twice
// is off by O(1).
constexpr double kTol = 1e-5;
constexpr int64_t kBatch = 3, kSteps = 8;

// Vocabulary 13 is uneven over 2 and 4 ranks; 4 heads allow tp 1, 2 and 4.
GptConfig small_gpt() {
  GptConfig g;
  g.vocab_size = 13;
  g.context = 8;
  g.width = 16;
  g.layers = 2;
  g.heads = 4;
  g.mlp_ratio = 2;
  return g;
}

// The independent reference: the single-process model, its loss, accuracy and gradients.
struct Reference {
  std::unique_ptr<Model> model;
  Tensor input;  // [B, T] ids
  std::vector<int32_t> targets;
  Tensor logits;  // [B*T, vocab]
  float loss = 0;
  int64_t correct = 0;
  std::vector<float> grads;
};

Reference make_reference() {
  Reference r;
  ModelConfig mc;
  mc.kind = "gpt";
  mc.gpt = small_gpt();
  mc.seed = 11;
  r.model = build_model(mc);
  std::mt19937 gen(5);
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(mc.gpt.vocab_size - 1));
  r.input = Tensor({kBatch, kSteps});
  for (int64_t i = 0; i < r.input.numel(); ++i) r.input[i] = static_cast<float>(id(gen));
  r.targets.resize(static_cast<size_t>(kBatch * kSteps));
  for (auto& t : r.targets) t = id(gen);
  r.logits = r.model->forward(r.input);
  SoftmaxCrossEntropy ce;
  r.loss = ce.forward(r.logits, r.targets);
  r.correct = count_correct(r.logits, r.targets);
  Tensor dlogits;
  ce.backward(dlogits);
  r.model->zero_grad();
  r.model->backward(dlogits);
  r.grads.assign(r.model->grads().begin(), r.model->grads().end());
  return r;
}

// One tp rank's model: the tp blocks over a local layout and local flat buffers.
struct TpRank {
  GptConfig config;
  TpGroup tp;
  std::vector<std::unique_ptr<Layer>> blocks;
  ParamLayout layout;
  Buffer params, grads;
  std::vector<ParamSlice> slices;
  std::vector<Tensor> acts;
  Tensor dcur, dnext;

  TpRank(const GptConfig& c, TpGroup group, const ParamLayout& global) : config(c), tp(group) {
    const int n = static_cast<int>(c.layers + 2);
    for (int b = 0; b < n; ++b) {
      blocks.push_back(build_tp_gpt_block(c, b, tp));
      blocks.back()->declare(layout, fmt::format("blocks.{}.", b), b);
    }
    params = make_buffer(MemCategory::params, layout.size());
    grads = make_buffer(MemCategory::grads, layout.size());
    const ParamBinding binding{&layout, &host_device(), DevicePtr<float>(params.data()), DevicePtr<float>(grads.data()), 0};
    for (auto& b : blocks) b->bind(binding);
    slices = tp_param_slices(layout, global, c, tp);
    acts.resize(blocks.size());
  }

  void load(const ParamLayout& global, std::span<const float> global_params) {
    for (const ParamSlice& s : slices)
      copy_global_to_local(s, layout, global, global_params, 0, params, 0);
  }

  // Logits [rows, local vocabulary columns].
  Tensor& forward(const Tensor& input) {
    for (size_t i = 0; i < blocks.size(); ++i)
      blocks[i]->forward(i == 0 ? input : acts[i - 1], acts[i]);
    Tensor& out = acts.back();
    out.reshape({out.numel() / out.dim(-1), out.dim(-1)});
    return out;
  }

  void backward(const Tensor& dlogits) {
    for (size_t i = blocks.size(); i-- > 0;) {
      blocks[i]->backward(i + 1 == blocks.size() ? dlogits : dcur, dnext);
      std::swap(dcur, dnext);
    }
  }

  // The key part [C/tp, 2C/tp) of each transformer block's local qkv.bias gradient.
  std::vector<std::span<float>> key_bias_grads() {
    std::vector<std::span<float>> parts;
    const int64_t cl = config.width / tp.size;
    for (int64_t l = 1; l <= config.layers; ++l) {
      const ParamInfo& p = layout[layout.index_of(fmt::format("blocks.{}.attn.qkv.bias", l))];
      parts.push_back(std::span<float>(grads).subspan(static_cast<size_t>(p.offset + cl),
                                                      static_cast<size_t>(cl)));
    }
    return parts;
  }
};

// What one rank saw, checked on the main thread after run_threads.
struct RankResult {
  float loss = 0;
  int64_t correct = -1;
  IndexRange vocab;
  Tensor logits;
  ParamLayout layout;
  std::vector<ParamSlice> slices;
  std::vector<float> grads;
  bool key_bias_kept = false;
};

// max |got - ref| / max |ref| (exact equality required when ref is all zeros).
double rel_diff(std::span<const float> ref, std::span<const float> got) {
  double worst = 0, scale = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(got[i]) - ref[i]));
    scale = std::max(scale, std::abs(static_cast<double>(ref[i])));
  }
  if (scale == 0) return worst == 0 ? 0 : std::numeric_limits<double>::infinity();
  return worst / scale;
}

// The tensor-parallel sizes the suites sweep (the divisors of the 4 heads).
void add_tp_column() {
  QTest::addColumn<int>("tp");
  for (int tp : {1, 2, 4}) QTest::addRow("tp%d", tp) << tp;
}

QString qs(const std::string& s) {
  return QString::fromStdString(s);
}

}  // namespace

class TestTensorParallel : public QObject {
  Q_OBJECT

 private:
  Reference ref_;

 private slots:
  void initTestCase() {
    kernels::use_single_blas_thread();
    ref_ = make_reference();
  }

  void matchesSingleProcess_data() { add_tp_column(); }

  // Loss, accuracy, logit columns and every gradient against the single-process model.
  void matchesSingleProcess() {
    QFETCH(int, tp);
    const GptConfig config = small_gpt();
    const ParamLayout& global = ref_.model->layout();
    std::vector<RankResult> results(static_cast<size_t>(tp));
    CommOptions options;
    options.timeout = std::chrono::milliseconds(30000);
    run_threads(tp, options, [&](Communicator& comm) {
      const TpGroup group = TpGroup::of(comm);
      TpRank rank(config, group, global);
      rank.load(global, ref_.model->params());
      RankResult& out = results[static_cast<size_t>(comm.rank())];
      out.vocab = tp_vocab_part(config, group);
      const Tensor& logits = rank.forward(ref_.input);
      out.logits = logits;
      VocabParallelCrossEntropy ce(group);
      out.loss = ce.forward(logits, ref_.targets, out.vocab.begin, config.vocab_size);
      out.correct = count_correct_vocab_parallel(logits, ref_.targets, out.vocab.begin, group);
      Tensor dlogits;
      ce.backward(dlogits);
      // Sentinels in the key-bias gradient: backward must leave them bit for bit.
      std::vector<float> before;
      for (std::span<float> part : rank.key_bias_grads())
        for (size_t j = 0; j < part.size(); ++j) {
          part[j] = 0.125f * static_cast<float>(j + 1);
          before.push_back(part[j]);
        }
      rank.backward(dlogits);
      std::vector<float> after;
      for (std::span<float> part : rank.key_bias_grads()) {
        after.insert(after.end(), part.begin(), part.end());
        std::fill(part.begin(), part.end(), 0.0f);  // the reference's key part is exactly zero
      }
      out.key_bias_kept =
          before.size() == after.size() &&
          std::memcmp(before.data(), after.data(), before.size() * sizeof(float)) == 0;
      out.layout = rank.layout;
      out.slices = rank.slices;
      out.grads.assign(rank.grads.begin(), rank.grads.end());
    });

    const int64_t V = config.vocab_size, R = ref_.logits.dim(0);
    double worst_logits = 0;
    for (int r = 0; r < tp; ++r) {
      const RankResult& res = results[static_cast<size_t>(r)];
      QVERIFY2(std::abs(res.loss - ref_.loss) <= kTol * std::abs(ref_.loss),
               qPrintable(QString("rank %1: loss %2, reference %3")
                              .arg(r)
                              .arg(res.loss, 0, 'g', 9)
                              .arg(ref_.loss, 0, 'g', 9)));
      QCOMPARE(res.correct, ref_.correct);
      QCOMPARE(res.logits.dim(0), R);
      QCOMPARE(res.logits.dim(1), res.vocab.size());
      QVERIFY(res.key_bias_kept);
      std::vector<float> want, got;
      for (int64_t i = 0; i < R; ++i)
        for (int64_t c = 0; c < res.vocab.size(); ++c) {
          want.push_back(ref_.logits[i * V + res.vocab.begin + c]);
          got.push_back(res.logits[i * res.vocab.size() + c]);
        }
      double worst = 0, scale = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        worst = std::max(worst, std::abs(static_cast<double>(got[i]) - want[i]));
        scale = std::max(scale, std::abs(static_cast<double>(want[i])));
      }
      worst_logits = std::max(worst_logits, worst / scale);
      // With one rank every block computes exactly what the plain block computes.
      if (tp == 1) QVERIFY(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) == 0);
    }
    QVERIFY2(worst_logits <= kTol, qPrintable(QString("logits rel diff %1").arg(worst_logits)));

    // Reassemble the gradients: each non-replicated element from the one rank holding it; each
    // replicated parameter checked on every rank.
    const int64_t n = global.size();
    std::vector<float> assembled(static_cast<size_t>(n), std::numeric_limits<float>::quiet_NaN());
    std::vector<int> cover(static_cast<size_t>(n), 0);
    std::vector<double> worst(global.params().size(), 0.0);
    for (int r = 0; r < tp; ++r) {
      const RankResult& res = results[static_cast<size_t>(r)];
      std::vector<float> mine(static_cast<size_t>(n), 0.0f);
      std::vector<float> ones(res.grads.size(), 1.0f), mask(static_cast<size_t>(n), 0.0f);
      for (const ParamSlice& s : res.slices) {
        copy_local_to_global(s, res.layout, global, res.grads, 0, mine, 0);
        copy_local_to_global(s, res.layout, global, ones, 0, mask, 0);
        const ParamInfo& g = global[s.global];
        const auto first = static_cast<size_t>(g.offset), count = static_cast<size_t>(g.numel);
        if (s.replicated) {
          worst[static_cast<size_t>(s.global)] =
              std::max(worst[static_cast<size_t>(s.global)],
                       rel_diff(std::span<const float>(ref_.grads).subspan(first, count),
                                std::span<const float>(mine).subspan(first, count)));
          continue;
        }
        for (size_t e = first; e < first + count; ++e)
          if (mask[e] == 1.0f) {
            assembled[e] = mine[e];
            ++cover[e];
          }
      }
    }
    std::string failures;
    double worst_all = 0;
    for (size_t p = 0; p < global.params().size(); ++p) {
      const ParamInfo& g = global.params()[p];
      const auto first = static_cast<size_t>(g.offset), count = static_cast<size_t>(g.numel);
      const bool replicated = results[0].slices.end() !=
                              std::find_if(results[0].slices.begin(), results[0].slices.end(),
                                           [&](const ParamSlice& s) {
                                             return s.global == static_cast<int>(p) && s.replicated;
                                           });
      if (!replicated) {
        for (size_t e = first; e < first + count; ++e)
          if (cover[e] != 1)
            failures += fmt::format("{}[{}] covered {} times; ", g.name, e - first, cover[e]);
        worst[p] = rel_diff(std::span<const float>(ref_.grads).subspan(first, count),
                            std::span<const float>(assembled).subspan(first, count));
      }
      worst_all = std::max(worst_all, worst[p]);
      if (!(worst[p] <= kTol))
        failures += fmt::format("{}: max rel diff {:.3g}; ", g.name, worst[p]);
    }
    qInfo(
        "tp=%d: loss %.9g (reference %.9g), correct %lld, logits max rel diff %.3g, gradients "
        "max rel diff %.3g",
        tp, static_cast<double>(results[0].loss), static_cast<double>(ref_.loss),
        static_cast<long long>(results[0].correct), worst_logits, worst_all);
    if (!failures.empty()) {
      for (size_t p = 0; p < global.params().size(); ++p)
        qInfo("  %-28s %.3g", global.params()[p].name.c_str(), worst[p]);
    }
    QVERIFY2(failures.empty(), failures.c_str());
  }

  void slicingRoundTrip_data() { add_tp_column(); }

  // global -> local -> global over all ranks gives the full buffer back exactly, every
  // non-replicated element covered by exactly one rank, also block by block (non-zero bases).
  void slicingRoundTrip() {
    QFETCH(int, tp);
    const GptConfig config = small_gpt();
    const ParamLayout& global = ref_.model->layout();
    const std::span<const float> full = ref_.model->params();
    const auto n = static_cast<size_t>(global.size());
    std::vector<float> whole(n, std::numeric_limits<float>::quiet_NaN()), by_block = whole;
    std::vector<int> cover(n, 0);
    std::vector<bool> replicated(global.params().size(), false);
    for (int r = 0; r < tp; ++r) {
      TpRank rank(config, TpGroup{nullptr, r, tp}, global);
      rank.load(global, full);
      std::vector<float> ones(rank.params.size(), 1.0f), mask(n, 0.0f);
      for (const ParamSlice& s : rank.slices) {
        QCOMPARE(global[s.global].name, rank.layout[s.local].name);
        if (s.replicated) {
          QCOMPARE(s.rects.size(), size_t{1});
          QCOMPARE(rank.layout[s.local].numel, global[s.global].numel);
          replicated[static_cast<size_t>(s.global)] = true;
        }
        copy_local_to_global(s, rank.layout, global, rank.params, 0, whole, 0);
        copy_local_to_global(s, rank.layout, global, ones, 0, mask, 0);
        // The same through one block's ranges: bases at the block's first elements.
        const int b = global[s.global].block;
        const IndexRange gr = global.block_range(b), lr = rank.layout.block_range(b);
        std::vector<float> local_block(static_cast<size_t>(lr.size()));
        copy_global_to_local(
            s, rank.layout, global,
            full.subspan(static_cast<size_t>(gr.begin), static_cast<size_t>(gr.size())), gr.begin,
            local_block, lr.begin);
        copy_local_to_global(s, rank.layout, global, local_block, lr.begin,
                             std::span<float>(by_block).subspan(static_cast<size_t>(gr.begin),
                                                                static_cast<size_t>(gr.size())),
                             gr.begin);
      }
      for (size_t e = 0; e < n; ++e) cover[e] += mask[e] == 1.0f;
    }
    QVERIFY(std::memcmp(whole.data(), full.data(), n * sizeof(float)) == 0);
    QVERIFY(std::memcmp(by_block.data(), full.data(), n * sizeof(float)) == 0);
    for (size_t p = 0; p < global.params().size(); ++p) {
      const ParamInfo& g = global.params()[p];
      const int want = replicated[p] ? tp : 1;
      for (int64_t e = g.offset; e < g.offset + g.numel; ++e)
        QVERIFY2(cover[static_cast<size_t>(e)] == want,
                 qPrintable(QString("%1 element %2 covered %3 times, expected %4")
                                .arg(qs(g.name))
                                .arg(e - g.offset)
                                .arg(cover[static_cast<size_t>(e)])
                                .arg(want)));
    }
  }

  void badInput() {
    GptConfig config = small_gpt();
    auto [type, msg] = caught([&] { validate_tp_gpt(config, 3); });
    QCOMPARE(type, std::string("InvalidArgument"));
    QVERIFY2(msg.find("parallel.tp") != std::string::npos, msg.c_str());
    QCOMPARE(msg, std::string("parallel.tp: 3 does not divide model.gpt.heads = 4"));
    QCOMPARE(caught([&] {
               (void)build_tp_gpt_block(config, 1, TpGroup{nullptr, 0, 3});
             }).first,
             std::string("InvalidArgument"));
    QCOMPARE(caught([&] {
               (void)build_tp_gpt_block(config, 4, TpGroup{nullptr, 0, 2});
             }).first,
             std::string("InvalidArgument"));

    // Ids out of range, not integers or negative: every rank refuses them before communicating.
    const ParamLayout& global = ref_.model->layout();
    for (float bad : {13.0f, 2.5f, -1.0f}) {
      Tensor input = ref_.input;
      input[5] = bad;
      CommOptions options;
      options.timeout = std::chrono::milliseconds(30000);
      auto [t, m] = caught([&] {
        run_threads(2, options, [&](Communicator& comm) {
          TpRank rank(config, TpGroup::of(comm), global);
          rank.load(global, ref_.model->params());
          rank.forward(input);
        });
      });
      QCOMPARE(t, std::string("InvalidArgument"));
      QVERIFY2(m.find("is not an integer in [0, 13)") != std::string::npos, m.c_str());
    }

    // A group of two without a communicator cannot run.
    std::vector<float> data(4, 1.0f);
    QCOMPARE(caught([&] {
               TpGroup{nullptr, 0, 2}.all_reduce_sum(data);
             }).first,
             std::string("InternalError"));
    TpGroup{}.all_reduce_max(data);  // size 1: nothing to do
    QCOMPARE(data[0], 1.0f);

    // A local layout that does not match the slicing rules.
    TpRank two(config, TpGroup{nullptr, 0, 2}, global);
    QCOMPARE(caught([&] {
               (void)tp_param_slices(two.layout, global, config, TpGroup{nullptr, 0, 4});
             }).first,
             std::string("InternalError"));
  }
};

QTEST_GUILESS_MAIN(TestTensorParallel)
#include "tst_tensor_parallel.moc"
