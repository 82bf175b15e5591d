// Model builders and layer behaviour that gradient checks cannot see: parameter layouts and
// counts, deterministic initialisation, config validation, causality, and forward values against
// straightforward references.
#include <QtTest>

#include <cmath>
#include <cstring>
#include <functional>
#include <map>

#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/core/rng.h"
#include "engine/model/activations.h"
#include "engine/model/attention.h"
#include "engine/model/cross_entropy.h"
#include "engine/model/embedding.h"
#include "engine/model/linear.h"
#include "engine/model/model.h"
#include "engine/model/sequential.h"

using namespace shardlab;

namespace {

ModelConfig small_mlp() {
  ModelConfig c;
  c.kind = "mlp";
  c.mlp.input_dim = 10;
  c.mlp.hidden = {6, 5};
  c.mlp.num_classes = 3;
  c.mlp.activation = "relu";
  return c;
}

ModelConfig small_gpt() {
  ModelConfig c;
  c.kind = "gpt";
  c.gpt.vocab_size = 11;
  c.gpt.context = 7;
  c.gpt.width = 8;
  c.gpt.layers = 3;
  c.gpt.heads = 2;
  c.gpt.mlp_ratio = 4;
  return c;
}

// Closed-form parameter counts, written out from the architecture independently of the code.
int64_t mlp_param_count(const MlpConfig& m) {
  int64_t n = 0, prev = m.input_dim;
  for (int64_t h : m.hidden) {
    n += (prev + 1) * h;
    prev = h;
  }
  return n + (prev + 1) * m.num_classes;
}

int64_t gpt_param_count(const GptConfig& g) {
  const int64_t C = g.width, V = g.vocab_size, H = g.mlp_ratio * g.width;
  const int64_t block = 2 * C                // ln1
                        + 3 * C * C + 3 * C  // attn.qkv
                        + C * C + C          // attn.proj
                        + 2 * C              // ln2
                        + H * C + H          // mlp.fc
                        + C * H + C;         // mlp.proj
  return V * C + g.context * C + g.layers * block + 2 * C + V * C;
}

// Passes everything to `inner` and counts how its caller ran backward: with dL/dx
// (Layer::backward) or without (Layer::backward_params_only).
class SpyLayer : public Layer {
 public:
  explicit SpyLayer(std::unique_ptr<Layer> inner) : inner_(std::move(inner)) {}
  std::string kind() const override { return "Spy"; }
  void declare(ParamLayout& layout, const std::string& prefix, int block) override {
    inner_->declare(layout, prefix, block);
  }
  void bind(const ParamBinding& binding) override { inner_->bind(binding); }
  void init(Rng& rng) override { inner_->init(rng); }
  void forward(const Tensor& x, Tensor& y) override { inner_->forward(x, y); }
  void backward(const Tensor& dy, Tensor& dx) override {
    ++with_dx;
    inner_->backward(dy, dx);
  }
  void backward_params_only(const Tensor& dy, Tensor& scratch) override {
    ++without_dx;
    inner_->backward_params_only(dy, scratch);
  }
  int with_dx = 0, without_dx = 0;

 private:
  std::unique_ptr<Layer> inner_;
};

// Bitwise equality of two float ranges (QCOMPARE on floats allows a relative difference).
bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

// Checks the layout is back to back, block by block, each name carrying its block's prefix.
void check_layout_invariants(const Model& model) {
  const ParamLayout& layout = model.layout();
  int64_t at = 0;
  for (const ParamInfo& p : layout.params()) {
    QCOMPARE(p.offset, at);
    QCOMPARE(p.numel, numel_of(p.shape));
    QVERIFY2(QString::fromStdString(p.name).startsWith(QString("blocks.%1.").arg(p.block)),
             p.name.c_str());
    at += p.numel;
  }
  QCOMPARE(at, model.num_params());
  QCOMPARE(static_cast<int64_t>(model.params().size()), model.num_params());
  QCOMPARE(static_cast<int64_t>(model.grads().size()), model.num_params());
  int64_t covered = 0;
  for (int b = 0; b < model.num_blocks(); ++b) {
    QCOMPARE(layout.block_range(b).begin, covered);
    covered = layout.block_range(b).end;
  }
  QCOMPARE(covered, model.num_params());
}

Tensor token_ids(int64_t B, int64_t T, int64_t vocab, uint64_t seed) {
  Rng rng(seed);
  Tensor t({B, T});
  for (float& v : t.span()) v = static_cast<float>(rng.below(static_cast<uint64_t>(vocab)));
  return t;
}

bool same_floats(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

}  // namespace

class TestModel : public QObject {
  Q_OBJECT
 private slots:
  void mlpLayout() {
    const ModelConfig config = small_mlp();
    auto model = build_model(config);
    QCOMPARE(model->num_blocks(), 3);
    QCOMPARE(model->num_params(), mlp_param_count(config.mlp));
    QCOMPARE(model->num_params(), (10 + 1) * 6 + (6 + 1) * 5 + (5 + 1) * 3);
    check_layout_invariants(*model);

    struct Expect {
      const char* name;
      Shape shape;
      int block;
    };
    const std::vector<Expect> expect = {
        {"blocks.0.fc.weight", {6, 10}, 0}, {"blocks.0.fc.bias", {6}, 0},
        {"blocks.1.fc.weight", {5, 6}, 1},  {"blocks.1.fc.bias", {5}, 1},
        {"blocks.2.out.weight", {3, 5}, 2}, {"blocks.2.out.bias", {3}, 2}};
    const auto& params = model->layout().params();
    QCOMPARE(params.size(), expect.size());
    for (size_t i = 0; i < expect.size(); ++i) {
      QCOMPARE(params[i].name, std::string(expect[i].name));
      QCOMPARE(params[i].shape, expect[i].shape);
      QCOMPARE(params[i].block, expect[i].block);
    }
    QCOMPARE(model->layout()[model->layout().index_of("blocks.1.fc.weight")].offset, 66);

    // The default configuration (784 -> 256 -> 128 -> 10) too.
    ModelConfig def;
    QCOMPARE(build_model(def)->num_params(), mlp_param_count(def.mlp));
    QCOMPARE(mlp_param_count(def.mlp), 235146);
  }

  void gptLayout() {
    const ModelConfig config = small_gpt();
    auto model = build_model(config);
    const int L = static_cast<int>(config.gpt.layers);
    QCOMPARE(model->num_blocks(), L + 2);
    QCOMPARE(model->num_params(), gpt_param_count(config.gpt));
    check_layout_invariants(*model);

    std::vector<std::string> names = {"blocks.0.tok.weight", "blocks.0.pos.weight"};
    for (int l = 1; l <= L; ++l)
      for (const char* p : {"ln1.weight", "ln1.bias", "attn.qkv.weight", "attn.qkv.bias",
                            "attn.proj.weight", "attn.proj.bias", "ln2.weight", "ln2.bias",
                            "mlp.fc.weight", "mlp.fc.bias", "mlp.proj.weight", "mlp.proj.bias"})
        names.push_back(fmt::format("blocks.{}.{}", l, p));
    names.push_back(fmt::format("blocks.{}.ln_f.weight", L + 1));
    names.push_back(fmt::format("blocks.{}.ln_f.bias", L + 1));
    names.push_back(fmt::format("blocks.{}.head.weight", L + 1));
    const auto& params = model->layout().params();
    QCOMPARE(params.size(), names.size());
    for (size_t i = 0; i < names.size(); ++i) QCOMPARE(params[i].name, names[i]);
    const ParamLayout& layout = model->layout();
    QCOMPARE(layout[layout.index_of("blocks.0.tok.weight")].shape, Shape({11, 8}));
    QCOMPARE(layout[layout.index_of("blocks.0.pos.weight")].shape, Shape({7, 8}));
    QCOMPARE(layout[layout.index_of("blocks.2.attn.qkv.weight")].shape, Shape({24, 8}));
    QCOMPARE(layout[layout.index_of("blocks.2.mlp.fc.weight")].shape, Shape({32, 8}));
    QCOMPARE(layout[layout.index_of("blocks.4.head.weight")].shape, Shape({11, 8}));
    QCOMPARE(layout.block_range(2).size(), layout.block_range(1).size());

    const QStringList lines = QString::fromStdString(model->summary()).trimmed().split('\n');
    QCOMPARE(lines.size(), model->num_blocks());
    QVERIFY(lines[1].contains("TransformerBlock"));
    QVERIFY(lines[1].contains(QString::number(layout.block_range(1).size())));
  }

  void initIsDeterministic() {
    for (const ModelConfig& config : {small_mlp(), small_gpt()}) {
      auto a = build_model(config);
      auto b = build_model(config);
      QVERIFY(same_floats(a->params(), b->params()));
      ModelConfig other = config;
      other.seed = config.seed + 1;
      auto c = build_model(other);
      QVERIFY(!same_floats(a->params(), c->params()));
      // init() overwrites every parameter: re-initialising perturbed values restores them.
      for (float& p : b->params()) p += 1.0f;
      b->init(config.seed);
      QVERIFY(same_floats(a->params(), b->params()));
      for (float p : a->params()) QVERIFY(std::isfinite(p));
    }
    // Block i draws from Rng::derive(seed, i): re-initialising one block alone from that stream
    // reproduces it (what a rank materialising only its own blocks relies on), and blocks of the
    // same shape get different values.
    auto gpt = build_model(small_gpt());
    const std::vector<float> fresh(gpt->params().begin(), gpt->params().end());
    const IndexRange b1 = gpt->layout().block_range(1), b2 = gpt->layout().block_range(2);
    for (int64_t i = b1.begin; i < b1.end; ++i) gpt->params()[i] = 0.0f;
    Rng stream = Rng::derive(small_gpt().seed, 1);
    gpt->block(1).init(stream);
    QVERIFY(same_floats(gpt->params(), fresh));
    QCOMPARE(b1.size(), b2.size());
    QVERIFY(!same_floats(gpt->params().subspan(b1.begin, b1.size()),
                         gpt->params().subspan(b2.begin, b2.size())));

    // Block 0 (the embeddings) does not depend on how many blocks follow.
    ModelConfig deeper = small_gpt();
    deeper.gpt.layers = 5;
    auto shallow = build_model(small_gpt()), deep = build_model(deeper);
    const IndexRange r = shallow->layout().block_range(0);
    QCOMPARE(deep->layout().block_range(0).size(), r.size());
    QVERIFY(same_floats(shallow->params().subspan(r.begin, r.size()),
                        deep->params().subspan(r.begin, r.size())));
  }

  void badConfigsThrow_data() {
    QTest::addColumn<QString>("mutation");
    QTest::addColumn<QString>("message");
    QTest::newRow("kind") << "kind"
                          << "model.kind: unknown kind 'cnn'";
    QTest::newRow("mlp input_dim") << "input_dim"
                                   << "model.mlp.input_dim: must be > 0, got 0";
    QTest::newRow("mlp hidden") << "hidden"
                                << "model.mlp.hidden[1]: must be > 0, got -4";
    QTest::newRow("mlp num_classes") << "num_classes"
                                     << "model.mlp.num_classes: must be > 0";
    QTest::newRow("mlp activation") << "activation"
                                    << "model.mlp.activation: unknown activation 'tanh'";
    QTest::newRow("gpt vocab_size") << "vocab_size"
                                    << "model.gpt.vocab_size: must be > 0";
    QTest::newRow("gpt context") << "context"
                                 << "model.gpt.context: must be > 0, got 0";
    QTest::newRow("gpt width") << "width"
                               << "model.gpt.width: must be > 0, got -8";
    QTest::newRow("gpt layers") << "layers"
                                << "model.gpt.layers: must be >= 0, got -1";
    QTest::newRow("gpt heads zero") << "heads0"
                                    << "model.gpt.heads: must be > 0, got 0";
    QTest::newRow("gpt heads divide") << "heads3"
                                      << "model.gpt.heads: 3 does not divide width 64";
    QTest::newRow("gpt mlp_ratio") << "mlp_ratio"
                                   << "model.gpt.mlp_ratio: must be > 0, got 0";
  }

  void badConfigsThrow() {
    QFETCH(QString, mutation);
    QFETCH(QString, message);
    const std::map<QString, std::function<void(ModelConfig&)>> mutate = {
        {"kind", [](ModelConfig& c) { c.kind = "cnn"; }},
        {"input_dim", [](ModelConfig& c) { c.mlp.input_dim = 0; }},
        {"hidden",
         [](ModelConfig& c) {
           c.mlp.hidden = {4, -4};
         }},
        {"num_classes", [](ModelConfig& c) { c.mlp.num_classes = 0; }},
        {"activation", [](ModelConfig& c) { c.mlp.activation = "tanh"; }},
        {"vocab_size", [](ModelConfig& c) { c.kind = "gpt", c.gpt.vocab_size = 0; }},
        {"context", [](ModelConfig& c) { c.kind = "gpt", c.gpt.context = 0; }},
        {"width", [](ModelConfig& c) { c.kind = "gpt", c.gpt.width = -8; }},
        {"layers", [](ModelConfig& c) { c.kind = "gpt", c.gpt.layers = -1; }},
        {"heads0", [](ModelConfig& c) { c.kind = "gpt", c.gpt.heads = 0; }},
        {"heads3", [](ModelConfig& c) { c.kind = "gpt", c.gpt.width = 64, c.gpt.heads = 3; }},
        {"mlp_ratio", [](ModelConfig& c) { c.kind = "gpt", c.gpt.mlp_ratio = 0; }},
    };
    ModelConfig config;  // valid apart from the mutation (GPT gets a vocabulary)
    config.gpt.vocab_size = 20;
    QVERIFY(build_model(config) != nullptr);
    mutate.at(mutation)(config);
    try {
      build_model(config);
      QFAIL("no exception");
    } catch (const InvalidArgument& e) {
      QVERIFY2(QString(e.what()).startsWith(message), e.what());
    }
  }

  void attentionIsCausal() {
    CausalSelfAttention attn(8, 2, 6);
    ParamLayout layout;
    attn.declare(layout, "", 0);
    std::vector<float> params(static_cast<size_t>(layout.size())), grads(params.size());
    attn.bind({&layout, &host_device(), DevicePtr<float>(params.data()), DevicePtr<float>(grads.data()), 0});
    Rng rng(3);
    attn.init(rng);
    Tensor x({2, 6, 8});
    rng.fill_normal(x.span(), 0.0f, 1.0f);
    Tensor y1, y2;
    attn.forward(x, y1);
    for (int64_t c = 0; c < 8; ++c) x[(1 * 6 + 3) * 8 + c] += 1.0f;  // sequence 1, position 3
    attn.forward(x, y2);
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t t = 0; t < 6; ++t) {
        float diff = 0;
        for (int64_t c = 0; c < 8; ++c) {
          const int64_t i = (b * 6 + t) * 8 + c;
          diff = std::max(diff, std::abs(y1[i] - y2[i]));
        }
        // Earlier outputs may differ by rounding only (an implementation is free to, say, take
        // the softmax's max over the whole row); a leak through the mask is far larger.
        const bool affected = b == 1 && t >= 3;
        QVERIFY2(affected ? diff > 1e-3f : diff < 1e-6f,
                 qPrintable(QString("b=%1 t=%2 diff=%3").arg(b).arg(t).arg(diff)));
      }

    // The same through a whole GPT model: earlier positions' logits ignore a later token.
    auto model = build_model(small_gpt());
    const int64_t T = 7, V = 11;
    Tensor ids = token_ids(1, T, V, 9);
    const Tensor before = model->forward(ids);
    ids[4] = static_cast<float>((static_cast<int64_t>(ids[4]) + 1) % V);
    const Tensor& after = model->forward(ids);
    for (int64_t t = 0; t < T; ++t) {
      float diff = 0;
      for (int64_t v = 0; v < V; ++v)
        diff = std::max(diff, std::abs(before[t * V + v] - after[t * V + v]));
      QVERIFY2(t >= 4 ? diff > 1e-3f : diff < 1e-6f,
               qPrintable(QString("t=%1 diff=%2").arg(t).arg(diff)));
    }
  }

  void linearMatchesNaiveLoop() {
    Linear lin(5, 4);
    ParamLayout layout;
    lin.declare(layout, "", 0);
    std::vector<float> params(static_cast<size_t>(layout.size())), grads(params.size());
    lin.bind({&layout, &host_device(), DevicePtr<float>(params.data()), DevicePtr<float>(grads.data()), 0});
    Rng rng(8);
    rng.fill_normal(params, 0.0f, 1.0f);  // non-zero bias too
    const float* w = params.data() + layout[layout.index_of("weight")].offset;
    const float* b = params.data() + layout[layout.index_of("bias")].offset;
    Tensor x({2, 3, 5});
    rng.fill_normal(x.span(), 0.0f, 1.0f);
    Tensor y;
    lin.forward(x, y);
    QCOMPARE(y.shape(), Shape({2, 3, 4}));
    for (int64_t r = 0; r < 6; ++r)
      for (int64_t o = 0; o < 4; ++o) {
        double ref = b[o];
        for (int64_t i = 0; i < 5; ++i) ref += static_cast<double>(x[r * 5 + i]) * w[o * 5 + i];
        QVERIFY2(std::abs(y[r * 4 + o] - ref) < 1e-5 * (1 + std::abs(ref)),
                 qPrintable(
                     QString("row %1 out %2: %3 vs %4").arg(r).arg(o).arg(y[r * 4 + o]).arg(ref)));
      }
    // Steady state: a second forward of the same shape reuses the output's storage.
    const float* storage = y.data();
    lin.forward(x, y);
    QCOMPARE(y.data(), storage);
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, lin.forward(Tensor({2, 4}), y));
  }

  void crossEntropyValues() {
    // Row 0: -log softmax(1, 2, 3)[2] = log(1 + e^-1 + e^-2); row 1: -log(1/3).
    const Tensor logits({2, 3}, {1.0f, 2.0f, 3.0f, 0.0f, 0.0f, 0.0f});
    const std::vector<int32_t> targets = {2, 1};
    const double expected = (std::log(1.0 + std::exp(-1.0) + std::exp(-2.0)) + std::log(3.0)) / 2;
    QVERIFY(std::abs(expected - 0.753109) < 1e-6);  // (0.407606 + 1.098612) / 2 by hand
    SoftmaxCrossEntropy ce;
    QVERIFY(std::abs(ce.forward(logits, targets) - expected) < 1e-6);
    Tensor d;
    ce.backward(d);
    QCOMPARE(d.shape(), logits.shape());
    QVERIFY(std::abs(d[3] - 1.0 / 6) < 1e-6 && std::abs(d[4] - (1.0 / 6 - 0.5)) < 1e-6);
    QCOMPARE(count_correct(logits, targets), int64_t(1));  // row 1 ties: argmax is class 0

    // Large logits stay finite thanks to the max shift.
    const Tensor big({1, 2}, {1000.0f, 0.0f});
    QVERIFY(std::abs(ce.forward(big, std::vector<int32_t>{1}) - 1000.0f) < 1e-3f);
    QCOMPARE(ce.forward(big, std::vector<int32_t>{0}), 0.0f);

    QVERIFY_THROWS_EXCEPTION(InvalidArgument, ce.forward(logits, std::vector<int32_t>{2, 3}));
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, ce.forward(logits, std::vector<int32_t>{-1, 0}));
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, ce.forward(logits, std::vector<int32_t>{0}));
  }

  void embeddingRejectsBadIds() {
    Embedding emb(5, 3);
    ParamLayout layout;
    emb.declare(layout, "", 0);
    std::vector<float> params(static_cast<size_t>(layout.size())), grads(params.size());
    emb.bind({&layout, &host_device(), DevicePtr<float>(params.data()), DevicePtr<float>(grads.data()), 0});
    Tensor y;
    emb.forward(Tensor({2}, {0.0f, 4.0f}), y);
    QCOMPARE(y.shape(), Shape({2, 3}));
    for (float bad : {7.0f, -1.0f, 2.5f}) {
      try {
        emb.forward(Tensor({3}, {1.0f, bad, 2.0f}), y);
        QFAIL("no exception");
      } catch (const InvalidArgument& e) {
        QVERIFY2(QString(e.what()).contains(QString("id %1 ").arg(bad)), e.what());
      }
    }
  }

  // Nobody needs the gradient with respect to the data: Model::backward runs block 0 through
  // backward_params_only (every other block through backward), and a Sequential passes that on
  // to its first child.
  void firstBlockSkipsInputGradient() {
    std::vector<std::unique_ptr<Layer>> blocks;
    auto first = std::make_unique<Sequential>("Linear+Relu");
    auto* first_linear = &static_cast<SpyLayer&>(
        first->add("fc", std::make_unique<SpyLayer>(std::make_unique<Linear>(10, 6))));
    first->emplace<Relu>("act");
    auto* first_block = new SpyLayer(std::move(first));
    blocks.emplace_back(first_block);
    auto* second_block = new SpyLayer(std::make_unique<Linear>(6, 3));
    blocks.emplace_back(second_block);
    Model model(small_mlp(), std::move(blocks));
    model.init(7);
    Tensor x({4, 10});
    Rng(2).fill_normal(x.span(), 0.0f, 1.0f);
    model.forward(x);
    Tensor d({4, 3});
    Rng(3).fill_normal(d.span(), 0.0f, 1.0f);
    model.backward(d);
    QCOMPARE(second_block->with_dx, 1);
    QCOMPARE(second_block->without_dx, 0);
    QCOMPARE(first_block->with_dx, 0);
    QCOMPARE(first_block->without_dx, 1);
    QCOMPARE(first_linear->with_dx, 0);  // the first Linear's dx GEMM is not run
    QCOMPARE(first_linear->without_dx, 1);
  }

  // Linear::backward_params_only adds the same bits to dW and db as backward, and skips dx: the
  // caller's scratch tensor is left as it was.
  void linearParamsOnlySameBits() {
    for (const bool bias : {true, false}) {
      Linear full(7, 5, bias), part(7, 5, bias);
      ParamLayout layout, same_layout;
      full.declare(layout, "", 0);
      part.declare(same_layout, "", 0);
      const auto n = static_cast<size_t>(layout.size());
      std::vector<float> params(n), grads_full(n), grads_part(n);
      full.bind(ParamBinding{&layout, &host_device(), DevicePtr<float>(params.data()), DevicePtr<float>(grads_full.data()), 0});
      part.bind(ParamBinding{&same_layout, &host_device(), DevicePtr<float>(params.data()), DevicePtr<float>(grads_part.data()), 0});
      Rng rng(4);
      full.init(rng);
      rng.fill_normal(std::span<float>(params).last(bias ? 5 : 0), 0.0f, 1.0f);
      // Nonzero starting gradients: both ADD.
      Rng(5).fill_normal(grads_full, 0.0f, 1.0f);
      grads_part = grads_full;
      Tensor x({2, 3, 7});
      Rng(6).fill_normal(x.span(), 0.0f, 1.0f);
      Tensor y1, y2;
      full.forward(x, y1);
      part.forward(x, y2);
      Tensor dy({6, 5});
      Rng(7).fill_normal(dy.span(), 0.0f, 3.0f);
      Tensor dx;
      full.backward(dy, dx);
      QCOMPARE(dx.shape(), x.shape());
      Tensor scratch({3}, {1.0f, 2.0f, 3.0f});
      part.backward_params_only(dy, scratch);
      QVERIFY(same_bits(grads_part, grads_full));
      QCOMPARE(scratch.shape(), Shape({3}));
      QCOMPARE(scratch[0], 1.0f);
      QCOMPARE(scratch[2], 3.0f);
    }
  }

  // The models' gradients through Model::backward (block 0 without its input gradient) are the
  // same bits as with every block's full backward, dx included.
  void skippedInputGradientSameBits_data() {
    QTest::addColumn<QString>("kind");
    QTest::newRow("mlp") << "mlp";
    QTest::newRow("gpt") << "gpt";
  }
  void skippedInputGradientSameBits() {
    QFETCH(QString, kind);
    const bool gpt = kind == "gpt";
    auto model = build_model(gpt ? small_gpt() : small_mlp());
    Tensor x({4, 10});
    if (gpt) {
      x = token_ids(3, 5, 11, 8);
    } else {
      Rng(8).fill_normal(x.span(), 0.0f, 1.0f);
    }
    const Tensor& logits = model->forward(x);
    Tensor d(logits.shape());
    Rng(9).fill_normal(d.span(), 0.0f, 1.0f);
    model->zero_grad();
    model->backward(d);
    const std::vector<float> skipped(model->grads().begin(), model->grads().end());
    // Every block through backward, as the pipeline's first stage runs them.
    model->zero_grad();
    Tensor cur = d, next;
    for (int b = model->num_blocks(); b-- > 0;) {
      model->block(b).backward(cur, next);
      std::swap(cur, next);
    }
    QVERIFY(same_bits(model->grads(), skipped));
    double norm = 0;
    for (float g : skipped) norm += double(g) * g;
    QVERIFY(norm > 0);
  }

  void modelForwardBackward() {
    auto gpt = build_model(small_gpt());
    const Tensor ids = token_ids(3, 5, 11, 4);
    const Tensor& logits = gpt->forward(ids);
    QCOMPARE(logits.shape(), Shape({15, 11}));
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, gpt->forward(token_ids(1, 8, 11, 4)));  // T > context

    auto mlp = build_model(small_mlp());
    Tensor x({4, 10});
    Rng(1).fill_normal(x.span(), 0.0f, 1.0f);
    const std::vector<int32_t> targets = {0, 1, 2, 0};
    SoftmaxCrossEntropy ce;
    ce.forward(mlp->forward(x), targets);
    Tensor d;
    ce.backward(d);
    QCOMPARE(mlp->forward(x).shape(), Shape({4, 3}));
    mlp->zero_grad();
    mlp->backward(d);
    const std::vector<float> once(mlp->grads().begin(), mlp->grads().end());
    double norm = 0;
    for (float g : once) norm += double(g) * g;
    QVERIFY(norm > 0);
    mlp->backward(d);  // accumulates
    for (size_t i = 0; i < once.size(); ++i) QCOMPARE(mlp->grads()[i], 2 * once[i]);
    mlp->zero_grad();
    for (float g : mlp->grads()) QCOMPARE(g, 0.0f);
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, mlp->backward(Tensor({3, 3})));
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, mlp->block(3));
  }
};

QTEST_APPLESS_MAIN(TestModel)
#include "tst_model.moc"
