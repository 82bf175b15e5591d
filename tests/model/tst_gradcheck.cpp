// Finite-difference gradient checks: every layer's input and parameter gradients, the
// cross-entropy loss, and whole small MLP and GPT models through the loss.
//
// The analytic side is one forward + backward; the numeric side is a central difference
// (L(v + e) - L(v - e)) / (2e) of a scalar loss summed in double. Layers are checked through
// L = sum(y * w) for a fixed random w, so every output element carries a different weight.
// Gradient buffers start at kGradSeed rather than zero, which also checks that backward ADDS.
#include <QtTest>

#include <cmath>
#include <functional>
#include <map>
#include <memory>

#include "engine/core/param_layout.h"
#include "engine/core/rng.h"
#include "engine/device/tensor.h"
#include "engine/model/activations.h"
#include "engine/model/attention.h"
#include "engine/model/cross_entropy.h"
#include "engine/model/embedding.h"
#include "engine/model/layer_norm.h"
#include "engine/model/linear.h"
#include "engine/model/model.h"
#include "engine/model/sequential.h"
#include "engine/model/transformer_block.h"

using namespace shardlab;

namespace {

constexpr float kGradSeed = 0.25f;

// Step of the central differences: small enough that truncation error (~eps^2) is negligible,
// large enough that float rounding in the forward pass (~1e-7 / eps) is too. 3e-3 gave the most
// headroom over 1e-2 ... 3e-4 on these cases.
constexpr double kEps = 3e-3;
// An element passes when |analytic - numeric| <= kRel * max(|analytic|, |numeric|) + kAbs * scale,
// scale being the largest numeric gradient of its group: small entries are judged against the
// group's size, since float rounding makes their differences noisy in absolute terms. Correct
// code stays below a third of this bound on every case; a dropped term overshoots it many times.
constexpr double kRel = 5e-3;
constexpr double kAbs = 5e-4;

// Compares analytic[i] with the central difference of `loss` over vals[i] (perturbed in place and
// restored). Returns an empty string on success, else a description of the worst element.
QString check_group(const QString& what, float* vals, int64_t n,
                    const std::function<double(int64_t)>& analytic,
                    const std::function<double()>& loss) {
  std::vector<double> numeric(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const float orig = vals[i];
    const float hi = orig + static_cast<float>(kEps), lo = orig - static_cast<float>(kEps);
    vals[i] = hi;
    const double lp = loss();
    vals[i] = lo;
    const double lm = loss();
    vals[i] = orig;
    // Divide by the step actually taken: hi - lo is rounded to float.
    numeric[static_cast<size_t>(i)] = (lp - lm) / (static_cast<double>(hi) - lo);
  }
  double scale = 0;
  for (double v : numeric) scale = std::max(scale, std::abs(v));
  double worst = 0;
  int64_t worst_i = -1;
  for (int64_t i = 0; i < n; ++i) {
    const double a = analytic(i), nu = numeric[static_cast<size_t>(i)];
    const double bound = kRel * std::max(std::abs(a), std::abs(nu)) + kAbs * scale + 1e-9;
    const double ratio = std::abs(a - nu) / bound;
    if (!(ratio <= worst)) {  // also catches NaN
      worst = ratio;
      worst_i = i;
    }
  }
  if (qEnvironmentVariableIsSet("SHARDLAB_GRADCHECK_VERBOSE"))
    qInfo("%-40s n=%-5lld scale=%-10.3g worst error/tolerance=%.3g", qPrintable(what),
          static_cast<long long>(n), scale, worst);
  if (worst <= 1.0) return {};
  return QString("%1[%2]: analytic %3 vs numeric %4 (scale %5)")
      .arg(what)
      .arg(worst_i)
      .arg(analytic(worst_i), 0, 'g', 6)
      .arg(numeric[static_cast<size_t>(worst_i)], 0, 'g', 6)
      .arg(scale, 0, 'g', 4);
}

// A layer under test and its input.
struct LayerCase {
  std::unique_ptr<Layer> layer;
  Tensor x;
  bool input_grad;  // false for id inputs, which have no gradient
};

LayerCase make_case(std::unique_ptr<Layer> layer, Tensor x, bool input_grad = true) {
  return LayerCase{std::move(layer), std::move(x), input_grad};
}

Tensor random_tensor(Shape shape, Rng& rng, float stddev = 1.0f) {
  Tensor t(std::move(shape));
  rng.fill_normal(t.span(), 0.0f, stddev);
  return t;
}

// Values kept at least `gap` away from 0, for layers with a kink there.
Tensor away_from_zero(Shape shape, Rng& rng, float gap) {
  Tensor t = random_tensor(std::move(shape), rng);
  for (float& v : t.span()) v = v < 0 ? v - gap : v + gap;
  return t;
}

Tensor ids(Shape shape, int64_t num, Rng& rng) {
  Tensor t(std::move(shape));
  for (float& v : t.span()) v = static_cast<float>(rng.below(static_cast<uint64_t>(num)));
  return t;
}

std::map<QString, std::function<LayerCase(Rng&)>> layer_cases() {
  std::map<QString, std::function<LayerCase(Rng&)>> m;
  m["linear"] = [](Rng& r) {
    return make_case(std::make_unique<Linear>(5, 4), random_tensor({3, 5}, r));
  };
  m["linear, no bias, 3-d input"] = [](Rng& r) {
    return make_case(std::make_unique<Linear>(4, 6, false), random_tensor({2, 3, 4}, r));
  };
  m["relu"] = [](Rng& r) {
    return make_case(std::make_unique<Relu>(), away_from_zero({3, 7}, r, 0.1f));
  };
  m["gelu"] = [](Rng& r) {
    return make_case(std::make_unique<Gelu>(), random_tensor({3, 7}, r, 2.0f));
  };
  m["layernorm"] = [](Rng& r) {
    return make_case(std::make_unique<LayerNorm>(6), random_tensor({2, 2, 6}, r));
  };
  m["embedding, repeated ids"] = [](Rng& r) {
    return make_case(std::make_unique<Embedding>(5, 3), ids({4, 3}, 5, r), false);
  };
  m["token+position embedding"] = [](Rng& r) {
    return make_case(std::make_unique<TokenPositionEmbedding>(5, 6, 4), ids({2, 4}, 5, r), false);
  };
  m["attention, T = context"] = [](Rng& r) {
    return make_case(std::make_unique<CausalSelfAttention>(8, 2, 5), random_tensor({2, 5, 8}, r));
  };
  m["attention, one head, T < context"] = [](Rng& r) {
    return make_case(std::make_unique<CausalSelfAttention>(4, 1, 8), random_tensor({1, 6, 4}, r));
  };
  m["sequential"] = [](Rng& r) {
    auto s = std::make_unique<Sequential>();
    s->emplace<Linear>("a", 4, 6);
    s->emplace<Gelu>("act");
    s->emplace<Linear>("b", 6, 3);
    return make_case(std::move(s), random_tensor({3, 4}, r));
  };
  m["transformer block"] = [](Rng& r) {
    return make_case(std::make_unique<TransformerBlock>(8, 2, 6, 2), random_tensor({2, 5, 8}, r));
  };
  return m;
}

// Mean cross-entropy in double, independent of SoftmaxCrossEntropy, for the numeric side.
double reference_loss(const Tensor& logits, const std::vector<int32_t>& targets) {
  const int64_t R = logits.dim(0), C = logits.dim(1);
  double total = 0;
  for (int64_t r = 0; r < R; ++r) {
    const float* l = logits.data() + r * C;
    double mx = l[0];
    for (int64_t c = 1; c < C; ++c) mx = std::max(mx, static_cast<double>(l[c]));
    double sum = 0;
    for (int64_t c = 0; c < C; ++c) sum += std::exp(l[c] - mx);
    total += mx + std::log(sum) - l[targets[static_cast<size_t>(r)]];
  }
  return total / static_cast<double>(R);
}

// Checks every parameter of `model` through the cross-entropy of (input, targets).
QString check_model(Model& model, const Tensor& input, const std::vector<int32_t>& targets) {
  // Move the parameters off their initial values so unit scales and zero biases hide nothing.
  Rng rng(99);
  for (float& p : model.params()) p += rng.normal(0.0f, 0.2f);
  std::fill(model.grads().begin(), model.grads().end(), kGradSeed);
  SoftmaxCrossEntropy ce;
  ce.forward(model.forward(input), targets);
  Tensor dlogits;
  ce.backward(dlogits);
  model.backward(dlogits);
  auto loss = [&] { return reference_loss(model.forward(input), targets); };
  QString failures;
  for (const ParamInfo& info : model.layout().params()) {
    const float* g = model.grads().data() + info.offset;
    const QString err = check_group(
        QString::fromStdString(info.name), model.params().data() + info.offset, info.numel,
        [&](int64_t i) { return static_cast<double>(g[i]) - kGradSeed; }, loss);
    if (!err.isEmpty()) failures += err + "\n";
  }
  return failures;
}

}  // namespace

class TestGradcheck : public QObject {
  Q_OBJECT
 private slots:
  void layerGradients_data() {
    QTest::addColumn<QString>("name");
    for (const auto& entry : layer_cases()) QTest::newRow(qPrintable(entry.first)) << entry.first;
  }

  void layerGradients() {
    QFETCH(QString, name);
    Rng rng(2024);
    LayerCase c = layer_cases().at(name)(rng);
    Layer& layer = *c.layer;

    ParamLayout layout;
    layer.declare(layout, "", 0);
    std::vector<float> params(static_cast<size_t>(layout.size()));
    std::vector<float> grads(static_cast<size_t>(layout.size()), kGradSeed);
    layer.bind({&layout, &host_device(), DevicePtr<float>(params.data()),
                DevicePtr<float>(grads.data()), 0});
    layer.init(rng);
    for (float& p : params) p += rng.normal(0.0f, 0.3f);

    Tensor y;
    layer.forward(c.x, y);
    const Tensor w = random_tensor(y.shape(), rng);
    Tensor dx;
    layer.backward(w, dx);
    QCOMPARE(dx.shape(), c.x.shape());

    Tensor x = c.x;
    auto loss = [&] {
      Tensor out;
      layer.forward(x, out);
      double s = 0;
      for (int64_t i = 0; i < out.numel(); ++i) s += static_cast<double>(out[i]) * w[i];
      return s;
    };
    QString failures;
    if (c.input_grad) {
      failures += check_group(
          "input", x.data(), x.numel(), [&](int64_t i) { return static_cast<double>(dx[i]); },
          loss);
    } else {
      for (float v : dx.span()) QCOMPARE(v, 0.0f);  // ids carry no gradient
    }
    for (const ParamInfo& info : layout.params()) {
      const QString err = check_group(
          QString::fromStdString(info.name), params.data() + info.offset, info.numel,
          [&](int64_t i) { return static_cast<double>(grads[info.offset + i]) - kGradSeed; }, loss);
      if (!err.isEmpty()) failures += "\n" + err;
    }
    QVERIFY2(failures.isEmpty(), qPrintable(failures));
  }

  void crossEntropyGradient() {
    Rng rng(5);
    Tensor logits = random_tensor({4, 5}, rng, 2.0f);
    const std::vector<int32_t> targets = {0, 4, 2, 2};
    SoftmaxCrossEntropy ce;
    ce.forward(logits, targets);
    Tensor d;
    ce.backward(d);
    QCOMPARE(d.shape(), logits.shape());
    auto loss = [&] { return static_cast<double>(SoftmaxCrossEntropy().forward(logits, targets)); };
    const QString err = check_group(
        "dlogits", logits.data(), logits.numel(), [&](int64_t i) { return double(d[i]); }, loss);
    QVERIFY2(err.isEmpty(), qPrintable(err));
  }

  void mlpGradients_data() {
    QTest::addColumn<QString>("activation");
    QTest::newRow("relu") << "relu";
    QTest::newRow("gelu") << "gelu";
  }

  void mlpGradients() {
    QFETCH(QString, activation);
    ModelConfig config;
    config.kind = "mlp";
    config.mlp.input_dim = 6;
    config.mlp.hidden = {5, 4};
    config.mlp.num_classes = 3;
    config.mlp.activation = activation.toStdString();
    auto model = build_model(config);
    Rng rng(11);
    const Tensor input = random_tensor({4, 6}, rng);
    const std::vector<int32_t> targets = {0, 2, 1, 2};
    const QString failures = check_model(*model, input, targets);
    QVERIFY2(failures.isEmpty(), qPrintable(failures));
  }

  void gptGradients() {
    ModelConfig config;
    config.kind = "gpt";
    config.gpt.vocab_size = 7;
    config.gpt.context = 6;
    config.gpt.width = 8;
    config.gpt.layers = 2;
    config.gpt.heads = 2;
    config.gpt.mlp_ratio = 2;
    auto model = build_model(config);
    Rng rng(12);
    const Tensor input = ids({2, 5}, 7, rng);  // T = 5 < context
    std::vector<int32_t> targets(10);
    for (auto& t : targets) t = static_cast<int32_t>(rng.below(7));
    const QString failures = check_model(*model, input, targets);
    QVERIFY2(failures.isEmpty(), qPrintable(failures));
  }
};

QTEST_APPLESS_MAIN(TestGradcheck)
#include "tst_gradcheck.moc"
