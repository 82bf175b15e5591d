// Base optimizers: update math against values worked out here in double precision (by hand or in
// closed form, never through the kernels), range/shard equivalence, the binary state format and
// hyper-parameter validation.
#include <QtTest>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "engine/core/error.h"
#include "engine/core/rng.h"
#include "engine/optim/optimizer.h"

using namespace shardlab;

namespace {

OptimizerConfig cfg(const std::string& name, double lr) {
  OptimizerConfig c;
  c.name = name;
  c.lr = lr;
  return c;
}

// A float result against a double reference: the kernels compute in fp32, so allow a few ulps of
// the magnitudes involved (every expected step below is >= 1e-3, far above this).
void expect_near(float actual, double expected, const char* what, double tol = 2e-6) {
  QVERIFY2(
      std::abs(static_cast<double>(actual) - expected) <= tol * std::max(1.0, std::abs(expected)),
      qPrintable(QString("%1: got %2, expected %3")
                     .arg(what)
                     .arg(static_cast<double>(actual), 0, 'g', 10)
                     .arg(expected, 0, 'g', 10)));
}

std::span<float> state_of(Optimizer& o, const std::string& name) {
  for (auto& [k, s] : o.state())
    if (k == name) return s;
  return {};
}

bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Every optimizer and the variants that change which loop or state a kernel uses.
std::vector<OptimizerConfig> all_variants() {
  std::vector<OptimizerConfig> v;
  auto add = [&](OptimizerConfig c) { v.push_back(c); };
  add(cfg("sgd", 0.05));
  OptimizerConfig c = cfg("sgd", 0.05);
  c.momentum = 0.9;
  c.weight_decay = 0.01;
  add(c);
  c.nesterov = true;
  add(c);
  c = cfg("adam", 0.01);
  c.weight_decay = 0.02;
  add(c);
  c.name = "adamw";
  add(c);
  c = cfg("rmsprop", 0.01);
  add(c);
  c.momentum = 0.5;
  c.weight_decay = 0.01;
  add(c);
  c = cfg("adagrad", 0.1);
  c.initial_accumulator = 0.1;
  c.weight_decay = 0.01;
  add(c);
  return v;
}

std::vector<float> random_vector(Rng& r, size_t n) {
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(r.normal());
  return v;
}

// Plain bitwise CRC-32 (IEEE, reflected, polynomial 0xEDB88320), written here independently of
// the library so tests can forge well-checksummed but malformed states.
uint32_t crc32_ref(const uint8_t* p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

void reseal(std::vector<uint8_t>& b) {
  const uint32_t c = crc32_ref(b.data(), b.size() - 4);
  std::memcpy(b.data() + b.size() - 4, &c, 4);
}

// What a failed deserialize must leave alone.
struct Snapshot {
  int64_t steps;
  IndexRange range;
  std::vector<std::vector<float>> arrays;
  explicit Snapshot(Optimizer& o) : steps(o.steps()), range(o.range()) {
    for (auto& [k, s] : o.state()) arrays.emplace_back(s.begin(), s.end());
  }
  bool matches(Optimizer& o) const {
    if (o.steps() != steps || o.range().begin != range.begin || o.range().end != range.end)
      return false;
    auto st = o.state();
    if (st.size() != arrays.size()) return false;
    for (size_t i = 0; i < arrays.size(); ++i)
      if (!same_bits(st[i].second, arrays[i])) return false;
    return true;
  }
};

}  // namespace

class TestOptimizers : public QObject {
  Q_OBJECT
 private slots:
  // ---- update math ---------------------------------------------------------------------------

  void sgdPlain() {
    auto o = make_optimizer(cfg("sgd", 0.1));
    o->attach({0, 2});
    QCOMPARE(o->state().size(), size_t(0));  // plain SGD keeps no state
    QCOMPARE(o->state_bytes(), int64_t(0));
    std::vector<float> p = {1.0f, -2.0f};
    const std::vector<float> g = {0.5f, 0.25f};
    o->step(p, g, 0.1);
    expect_near(p[0], 1.0 - 0.1 * 0.5, "p0 step 1");    // 0.95
    expect_near(p[1], -2.0 - 0.1 * 0.25, "p1 step 1");  // -2.025
    o->step(p, g, 0.2);  // the lr passed to step() is the one used, not config.lr
    expect_near(p[0], 0.95 - 0.2 * 0.5, "p0 step 2");  // 0.85
    expect_near(p[1], -2.025 - 0.2 * 0.25, "p1 step 2");
    QCOMPARE(o->steps(), int64_t(2));
  }

  void sgdMomentum() {
    OptimizerConfig c = cfg("sgd", 0.1);
    c.momentum = 0.9;
    auto o = make_optimizer(c);
    o->attach({0, 1});
    std::vector<float> p = {1.0f};
    // step 1: buf = g = 0.5 (PyTorch's first step), p = 1 - 0.1 * 0.5 = 0.95
    o->step(p, std::vector<float>{0.5f}, 0.1);
    expect_near(state_of(*o, "momentum_buffer")[0], 0.5, "buf 1");
    expect_near(p[0], 0.95, "p 1");
    // step 2: buf = 0.9 * 0.5 - 0.25 = 0.2, p = 0.95 - 0.02 = 0.93
    o->step(p, std::vector<float>{-0.25f}, 0.1);
    expect_near(state_of(*o, "momentum_buffer")[0], 0.2, "buf 2");
    expect_near(p[0], 0.93, "p 2");
    // step 3: buf = 0.9 * 0.2 + 1 = 1.18, p = 0.93 - 0.118 = 0.812
    o->step(p, std::vector<float>{1.0f}, 0.1);
    expect_near(state_of(*o, "momentum_buffer")[0], 1.18, "buf 3");
    expect_near(p[0], 0.812, "p 3");
  }

  void sgdNesterov() {
    OptimizerConfig c = cfg("sgd", 0.1);
    c.momentum = 0.9;
    c.nesterov = true;
    auto o = make_optimizer(c);
    o->attach({0, 1});
    std::vector<float> p = {1.0f};
    // step 1: buf = 0.5, d = g + 0.9 buf = 0.95, p = 1 - 0.095 = 0.905
    o->step(p, std::vector<float>{0.5f}, 0.1);
    expect_near(p[0], 0.905, "p 1");
    // step 2: buf = 0.45 - 0.25 = 0.2, d = -0.25 + 0.18 = -0.07, p = 0.905 + 0.007 = 0.912
    o->step(p, std::vector<float>{-0.25f}, 0.1);
    expect_near(state_of(*o, "momentum_buffer")[0], 0.2, "buf 2");
    expect_near(p[0], 0.912, "p 2");
  }

  void sgdWeightDecay() {
    OptimizerConfig c = cfg("sgd", 0.1);
    c.weight_decay = 0.1;
    auto o = make_optimizer(c);
    o->attach({0, 1});
    std::vector<float> p = {2.0f};
    const std::vector<float> g = {0.5f};
    // step 1: g' = 0.5 + 0.1 * 2 = 0.7, p = 2 - 0.07 = 1.93
    o->step(p, g, 0.1);
    expect_near(p[0], 1.93, "p 1");
    // step 2: g' = 0.5 + 0.193 = 0.693, p = 1.93 - 0.0693 = 1.8607
    o->step(p, g, 0.1);
    expect_near(p[0], 1.8607, "p 2");

    // With momentum the decayed gradient is what enters the buffer.
    c.momentum = 0.5;
    auto m = make_optimizer(c);
    m->attach({0, 1});
    p = {2.0f};
    m->step(p, g, 0.1);  // buf = 0.7, p = 1.93
    m->step(p, g, 0.1);  // buf = 0.35 + 0.693 = 1.043, p = 1.93 - 0.1043 = 1.8257
    expect_near(state_of(*m, "momentum_buffer")[0], 1.043, "buf 2");
    expect_near(p[0], 1.8257, "p 2 momentum");
  }

  void adamBiasCorrection() {
    const double lr = 0.1, b1 = 0.9, b2 = 0.999, eps = 1e-8;
    auto o = make_optimizer(cfg("adam", lr));
    o->attach({0, 2});
    // Element 0: a constant gradient. Bias correction makes m_hat = g and v_hat = g^2 at every
    // step, so each step moves p by lr * g / (|g| + eps), i.e. almost exactly lr. Without the
    // correction step 1 would move it by lr * 0.1 / sqrt(0.001) = 3.16 lr.
    // Element 1: gradients 0.5, -1, 2, followed through the recurrence in double.
    std::vector<float> p = {1.0f, 1.0f};
    const double gs[3] = {0.5, -1.0, 2.0};
    double m = 0, v = 0, ref1 = 1.0;
    for (int t = 1; t <= 3; ++t) {
      o->step(p, std::vector<float>{0.5f, static_cast<float>(gs[t - 1])}, lr);
      QCOMPARE(o->steps(), int64_t(t));
      expect_near(p[0], 1.0 - t * lr * 0.5 / (0.5 + eps), "constant-gradient element");

      const double g = gs[t - 1];
      m = b1 * m + (1 - b1) * g;
      v = b2 * v + (1 - b2) * g * g;
      const double m_hat = m / (1 - std::pow(b1, t)), v_hat = v / (1 - std::pow(b2, t));
      ref1 -= lr * m_hat / (std::sqrt(v_hat) + eps);
      expect_near(state_of(*o, "exp_avg")[1], m, "exp_avg");
      expect_near(state_of(*o, "exp_avg_sq")[1], v, "exp_avg_sq", 1e-5);
      expect_near(p[1], ref1, qPrintable(QString("varying element, step %1").arg(t)));
    }
    // Spelled out for step 1: m = 0.05, v = 0.00025, m_hat = 0.5, v_hat = 0.25, p = 1 - 0.1.
    QVERIFY(std::abs(1.0 - lr * 0.5 / (0.5 + eps) - 0.9) < 1e-7);
  }

  void adamwDecoupledDecayDiffersFromAdam() {
    const double lr = 0.1, wd = 0.1, b1 = 0.9, b2 = 0.999, eps = 1e-8;
    OptimizerConfig c = cfg("adam", lr);
    c.weight_decay = wd;
    auto adam = make_optimizer(c);
    c.name = "adamw";
    auto adamw = make_optimizer(c);
    adam->attach({0, 1});
    adamw->attach({0, 1});
    std::vector<float> pa = {1.0f}, pw = {1.0f};
    // Step 1 by hand. Adam: g' = 0.5 + 0.1 * 1 = 0.6, normalised step lr * 0.6/(0.6 + eps),
    // p = 0.9. AdamW: p = 1 * (1 - 0.01) = 0.99 first, then the step on g = 0.5, p = 0.89.
    adam->step(pa, std::vector<float>{0.5f}, lr);
    adamw->step(pw, std::vector<float>{0.5f}, lr);
    expect_near(pa[0], 1.0 - lr * 0.6 / (0.6 + eps), "adam step 1");
    expect_near(pw[0], 0.99 - lr * 0.5 / (0.5 + eps), "adamw step 1");
    QVERIFY(std::abs(pa[0] - pw[0]) > 0.009f);
    // Adam's L2 term went into the moments; AdamW's did not.
    expect_near(state_of(*adam, "exp_avg")[0], 0.06, "adam exp_avg");
    expect_near(state_of(*adamw, "exp_avg")[0], 0.05, "adamw exp_avg");

    // Two more steps through the recurrence in double.
    double ma = 0.06, va = 0.001 * 0.36, ra = pa[0];
    double mw = 0.05, vw = 0.001 * 0.25, rw = pw[0];
    for (int t = 2; t <= 3; ++t) {
      const double g = t == 2 ? -0.3 : 0.2;
      adam->step(pa, std::vector<float>{static_cast<float>(g)}, lr);
      adamw->step(pw, std::vector<float>{static_cast<float>(g)}, lr);
      const double bc1 = 1 - std::pow(b1, t), bc2 = 1 - std::pow(b2, t);
      const double ga = g + wd * ra;
      ma = b1 * ma + (1 - b1) * ga;
      va = b2 * va + (1 - b2) * ga * ga;
      ra -= lr / bc1 * ma / (std::sqrt(va) / std::sqrt(bc2) + eps);
      rw *= 1 - lr * wd;
      mw = b1 * mw + (1 - b1) * g;
      vw = b2 * vw + (1 - b2) * g * g;
      rw -= lr / bc1 * mw / (std::sqrt(vw) / std::sqrt(bc2) + eps);
      expect_near(pa[0], ra, "adam", 1e-5);
      expect_near(pw[0], rw, "adamw", 1e-5);
    }
  }

  void rmspropPlain() {
    OptimizerConfig c = cfg("rmsprop", 0.01);
    c.alpha = 0.9;
    auto o = make_optimizer(c);
    o->attach({0, 1});
    QCOMPARE(o->state().size(), size_t(1));  // square_avg only, no momentum buffer
    std::vector<float> p = {1.0f};
    // step 1: v = 0.1 * 0.25 = 0.025, p = 1 - 0.01 * 0.5 / sqrt(0.025) = 1 - 0.0316227766
    o->step(p, std::vector<float>{0.5f}, 0.01);
    expect_near(state_of(*o, "square_avg")[0], 0.025, "v 1");
    expect_near(p[0], 0.9683772234, "p 1");
    // step 2: v = 0.0225 + 0.1 * 0.0625 = 0.02875, p += 0.01 * 0.25 / sqrt(0.02875)
    o->step(p, std::vector<float>{-0.25f}, 0.01);
    expect_near(state_of(*o, "square_avg")[0], 0.02875, "v 2");
    expect_near(p[0], 0.9683772234 + 0.0025 / std::sqrt(0.02875), "p 2");
  }

  void rmspropMomentumAndWeightDecay() {
    const double lr = 0.01, alpha = 0.9, mom = 0.5, wd = 0.1, eps = 1e-8;
    OptimizerConfig c = cfg("rmsprop", lr);
    c.alpha = alpha;
    c.momentum = mom;
    c.weight_decay = wd;
    auto o = make_optimizer(c);
    o->attach({0, 1});
    std::vector<float> p = {2.0f};
    // step 1 by hand: g' = 0.5 + 0.2 = 0.7, v = 0.1 * 0.49 = 0.049,
    // buf = 0.7 / sqrt(0.049) = 3.16227766, p = 2 - 0.0316227766
    o->step(p, std::vector<float>{0.5f}, lr);
    expect_near(state_of(*o, "momentum_buffer")[0], 3.16227766, "buf 1", 1e-5);
    expect_near(p[0], 1.9683772234, "p 1");
    double v = 0.049, buf = 0.7 / (std::sqrt(0.049) + eps), ref = 2.0 - lr * buf;
    for (double g : {-0.25, 0.75}) {
      o->step(p, std::vector<float>{static_cast<float>(g)}, lr);
      const double gd = g + wd * ref;
      v = alpha * v + (1 - alpha) * gd * gd;
      buf = mom * buf + gd / (std::sqrt(v) + eps);
      ref -= lr * buf;
      expect_near(p[0], ref, "p", 1e-5);
    }
  }

  void adagradInitialAccumulator() {
    OptimizerConfig c = cfg("adagrad", 0.1);
    c.initial_accumulator = 0.1;
    c.eps = 1e-10;
    auto o = make_optimizer(c);
    o->attach({0, 2});
    for (float s : state_of(*o, "sum")) QCOMPARE(s, 0.1f);
    std::vector<float> p = {1.0f, 1.0f};
    const std::vector<float> g = {0.5f, -1.0f};
    // element 0, step 1: sum = 0.1 + 0.25 = 0.35, p = 1 - 0.1 * 0.5 / sqrt(0.35)
    // element 1, step 1: sum = 1.1, p = 1 + 0.1 / sqrt(1.1)
    o->step(p, g, 0.1);
    expect_near(state_of(*o, "sum")[0], 0.35, "sum 1");
    expect_near(p[0], 1.0 - 0.05 / std::sqrt(0.35), "p0 1");  // 0.9154845
    expect_near(p[1], 1.0 + 0.1 / std::sqrt(1.1), "p1 1");
    // step 2: sum = 0.6, p -= 0.05 / sqrt(0.6)
    o->step(p, g, 0.1);
    expect_near(state_of(*o, "sum")[0], 0.6, "sum 2");
    expect_near(p[0], 1.0 - 0.05 / std::sqrt(0.35) - 0.05 / std::sqrt(0.6), "p0 2");

    // Weight decay is added to the gradient: g' = 0.5 + 0.5 * 1 = 1, sum = 1.1.
    c.weight_decay = 0.5;
    auto w = make_optimizer(c);
    w->attach({0, 1});
    std::vector<float> q = {1.0f};
    w->step(q, std::vector<float>{0.5f}, 0.1);
    expect_near(q[0], 1.0 - 0.1 / std::sqrt(1.1), "weight decay");
  }

  // ---- ranges ----------------------------------------------------------------------------------

  void rangeMatchesFullBuffer() {
    // An odd size and odd cut points so vector bodies and scalar tails land on different elements
    // in the full and the partial runs.
    const int64_t n = 103, a = 17, b = 71;
    for (const auto& c : all_variants()) {
      Rng r(11);
      std::vector<float> full = random_vector(r, n);
      std::vector<float> part(full.begin() + a, full.begin() + b);
      std::vector<float> p0(full.begin(), full.begin() + a), p2(full.begin() + b, full.end());
      std::vector<float> p1 = part;

      auto whole = make_optimizer(c);
      whole->attach({0, n});
      auto sub = make_optimizer(c);
      sub->attach({a, b});
      // Three optimizers splitting [0, n) the way a sharded strategy would.
      auto s0 = make_optimizer(c), s1 = make_optimizer(c), s2 = make_optimizer(c);
      s0->attach({0, a});
      s1->attach({a, b});
      s2->attach({b, n});
      for (int step = 0; step < 4; ++step) {
        const std::vector<float> g = random_vector(r, n);
        const double lr = c.lr * (1.0 - 0.2 * step);
        const std::span<const float> gs(g);
        whole->step(full, g, lr);
        sub->step(part, gs.subspan(a, b - a), lr);
        s0->step(p0, gs.subspan(0, a), lr);
        s1->step(p1, gs.subspan(a, b - a), lr);
        s2->step(p2, gs.subspan(b), lr);
      }
      const std::span<const float> fs(full);
      QVERIFY2(same_bits(part, fs.subspan(a, b - a)), c.name.c_str());
      QVERIFY2(same_bits(p0, fs.subspan(0, a)), c.name.c_str());
      QVERIFY2(same_bits(p1, fs.subspan(a, b - a)), c.name.c_str());
      QVERIFY2(same_bits(p2, fs.subspan(b)), c.name.c_str());
      // The state agrees element for element too (what resharding relies on).
      auto ws = whole->state(), ss = sub->state();
      QCOMPARE(ss.size(), ws.size());
      for (size_t i = 0; i < ws.size(); ++i)
        QVERIFY2(same_bits(ss[i].second, std::span<const float>(ws[i].second).subspan(a, b - a)),
                 qPrintable(QString::fromStdString(c.name + " " + ws[i].first)));
      QCOMPARE(sub->state_bytes(), static_cast<int64_t>(ws.size() * (b - a) * sizeof(float)));
    }
  }

  void stepAndAttachCheckArguments() {
    auto o = make_optimizer(cfg("adam", 0.01));
    o->attach({10, 20});
    QCOMPARE(o->range().begin, int64_t(10));
    QCOMPARE(o->range().size(), int64_t(10));
    std::vector<float> p(10), g(10), short_(9);
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, o->step(short_, g, 0.01));
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, o->step(p, short_, 0.01));
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, o->step(p, g, -1.0));
    QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                             o->step(p, g, std::numeric_limits<double>::quiet_NaN()));
    // params and grads overlapping would break the kernels' no-alias assumption
    std::vector<float> both(15);
    QVERIFY_THROWS_EXCEPTION(InvalidArgument,
                             o->step(std::span<float>(both).first(10),
                                     std::span<const float>(both).subspan(5, 10), 0.01));
    QCOMPARE(o->steps(), int64_t(0));  // rejected steps are not counted
    o->step(p, g, 0.01);
    QCOMPARE(o->steps(), int64_t(1));
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, o->attach({5, 4}));
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, o->attach({-1, 4}));
    o->attach({0, 3});  // re-attaching resets the count and the state
    QCOMPARE(o->steps(), int64_t(0));
    QCOMPARE(o->state_bytes(), int64_t(2 * 3 * 4));
  }

  // ---- state format ----------------------------------------------------------------------------

  void serializeRoundTripContinuesBitIdentically() {
    const IndexRange range{5, 26};
    for (const auto& c : all_variants()) {
      Rng r(3);
      std::vector<float> p = random_vector(r, range.size());
      auto a = make_optimizer(c);
      a->attach(range);
      for (int i = 0; i < 3; ++i) a->step(p, random_vector(r, range.size()), c.lr);
      const std::vector<uint8_t> bytes = a->serialize();

      auto b = make_optimizer(c);
      b->attach(range);
      b->deserialize(bytes);
      QCOMPARE(b->steps(), int64_t(3));
      QVERIFY(Snapshot(*a).matches(*b));
      QVERIFY(b->serialize() == bytes);

      std::vector<float> q = p;
      for (int i = 0; i < 3; ++i) {
        const std::vector<float> g = random_vector(r, range.size());
        a->step(p, g, c.lr);
        b->step(q, g, c.lr);
      }
      QVERIFY2(same_bits(p, q), c.name.c_str());
      QVERIFY2(Snapshot(*a).matches(*b), c.name.c_str());
    }
  }

  void serializeRecordsHyperParametersButLoadKeepsConfig() {
    OptimizerConfig c = cfg("adam", 0.01);
    auto a = make_optimizer(c);
    a->attach({0, 4});
    const auto bytes = a->serialize();
    // The name and hyper-parameter keys are readable in the bytes (a self-describing checkpoint).
    const std::string s(bytes.begin(), bytes.end());
    QVERIFY(s.starts_with(std::string("SLOPTIM\0", 8)));
    for (const char* key : {"adam", "lr", "beta1", "beta2", "eps", "exp_avg_sq"})
      QVERIFY2(s.find(key) != std::string::npos, key);
    // A resumed job may change lr: loading keeps the current configuration.
    c.lr = 0.5;
    auto b = make_optimizer(c);
    b->attach({0, 4});
    b->deserialize(bytes);
    QCOMPARE(b->config().lr, 0.5);
  }

  void deserializeRejectsCorruptBytesUnchanged() {
    OptimizerConfig c = cfg("adam", 0.01);
    Rng r(5);
    auto src = make_optimizer(c);
    src->attach({0, 6});
    std::vector<float> p = random_vector(r, 6);
    src->step(p, random_vector(r, 6), 0.01);
    const std::vector<uint8_t> good = src->serialize();

    // The target has state of its own, different from the source's, so "unchanged" means
    // something.
    auto dst = make_optimizer(c);
    dst->attach({0, 6});
    for (int i = 0; i < 2; ++i) dst->step(p, random_vector(r, 6), 0.01);
    const Snapshot before(*dst);

    for (size_t i = 0; i < good.size(); ++i) {
      for (uint8_t mask : {uint8_t{0x01}, uint8_t{0x80}}) {
        std::vector<uint8_t> bad = good;
        bad[i] ^= mask;
        QVERIFY_THROWS_EXCEPTION(FormatError, dst->deserialize(bad));
      }
    }
    for (size_t len = 0; len < good.size(); ++len)
      QVERIFY_THROWS_EXCEPTION(FormatError,
                               dst->deserialize(std::span<const uint8_t>(good).first(len)));
    std::vector<uint8_t> longer = good;
    longer.push_back(0);
    QVERIFY_THROWS_EXCEPTION(FormatError, dst->deserialize(longer));
    QVERIFY(before.matches(*dst));

    try {
      std::vector<uint8_t> bad = good;
      bad[bad.size() / 2] ^= 0x10;
      dst->deserialize(bad);
      QFAIL("no throw");
    } catch (const FormatError& e) {
      QVERIFY2(QString(e.what()).contains("checksum"), e.what());
    }
    dst->deserialize(good);  // and the good bytes still load
    QVERIFY(Snapshot(*src).matches(*dst));
  }

  void deserializeChecksStructureBehindTheChecksum() {
    auto o = make_optimizer(cfg("adagrad", 0.1));
    o->attach({0, 3});
    std::vector<uint8_t> good = o->serialize();
    uint32_t stored;
    std::memcpy(&stored, good.data() + good.size() - 4, 4);
    QCOMPARE(stored, crc32_ref(good.data(), good.size() - 4));  // a standard CRC-32

    auto expect_format = [&](std::vector<uint8_t> bad, const char* mention) {
      reseal(bad);
      try {
        o->deserialize(bad);
        QFAIL(mention);
      } catch (const FormatError& e) {
        QVERIFY2(QString(e.what()).contains(mention), e.what());
      }
    };
    // One stray byte between the last array and the checksum.
    std::vector<uint8_t> extra = good;
    extra.insert(extra.end() - 4, uint8_t{0});
    expect_format(extra, "unexpected bytes");
    // A future format version.
    std::vector<uint8_t> v2 = good;
    v2[8] = 2;
    expect_format(v2, "version 2");
    // The state array claims more elements than there are bytes: its i64 length sits right before
    // the 3 floats and the checksum.
    std::vector<uint8_t> longer = good;
    const size_t length_at = good.size() - 4 - 3 * sizeof(float) - sizeof(int64_t);
    int64_t length;
    std::memcpy(&length, good.data() + length_at, sizeof length);
    QCOMPARE(length, int64_t(3));
    length = 4;
    std::memcpy(longer.data() + length_at, &length, sizeof length);
    expect_format(longer, "claims 4 elements");
    QCOMPARE(o->steps(), int64_t(0));
    o->deserialize(good);
  }

  void deserializeRejectsOtherKindOrRangeUnchanged() {
    auto make = [](OptimizerConfig c, IndexRange range) {
      auto o = make_optimizer(c);
      o->attach(range);
      std::vector<float> p(static_cast<size_t>(range.size()), 1.0f),
          g(static_cast<size_t>(range.size()), 0.5f);
      o->step(p, g, c.lr);
      return o;
    };
    auto expect_invalid = [](Optimizer& dst, const std::vector<uint8_t>& bytes,
                             std::initializer_list<const char*> mentions) {
      const Snapshot before(dst);
      try {
        dst.deserialize(bytes);
        QFAIL("no throw");
      } catch (const InvalidArgument& e) {
        for (const char* m : mentions) QVERIFY2(QString(e.what()).contains(m), e.what());
      }
      QVERIFY(before.matches(dst));
    };

    const auto adam_bytes = make(cfg("adam", 0.01), {0, 8})->serialize();
    auto adamw = make(cfg("adamw", 0.01), {0, 8});
    expect_invalid(*adamw, adam_bytes, {"'adam'", "'adamw'"});
    auto sgd = make(cfg("sgd", 0.01), {0, 8});
    expect_invalid(*sgd, adam_bytes, {"'adam'", "'sgd'"});

    // Same size, different place in the flat buffer: another rank's shard.
    auto shifted = make(cfg("adam", 0.01), {8, 16});
    expect_invalid(*shifted, adam_bytes, {"[0, 8)", "[8, 16)"});
    auto longer = make(cfg("adam", 0.01), {0, 9});
    expect_invalid(*longer, adam_bytes, {"[0, 8)", "[0, 9)"});
    auto later_start = make(cfg("adam", 0.01), {2, 8});
    expect_invalid(*later_start, adam_bytes, {"[0, 8)", "[2, 8)"});

    // Same kind, but the state arrays differ (SGD with and without momentum).
    OptimizerConfig m = cfg("sgd", 0.01);
    m.momentum = 0.9;
    const auto momentum_bytes = make(m, {0, 8})->serialize();
    expect_invalid(*sgd, momentum_bytes, {"momentum_buffer"});
  }

  // ---- validation ------------------------------------------------------------------------------

  void makeOptimizerRejectsBadHyperParameters() {
    struct Case {
      const char* name;
      void (*mutate)(OptimizerConfig&);
      const char* field;
    };
    const Case cases[] = {
        {"adam", [](OptimizerConfig& c) { c.lr = 0; }, "optimizer.lr"},
        {"sgd", [](OptimizerConfig& c) { c.lr = -1; }, "optimizer.lr"},
        {"adam", [](OptimizerConfig& c) { c.lr = std::numeric_limits<double>::quiet_NaN(); },
         "optimizer.lr"},
        {"adam", [](OptimizerConfig& c) { c.beta1 = 1.0; }, "optimizer.beta1"},
        {"adamw", [](OptimizerConfig& c) { c.beta1 = -0.1; }, "optimizer.beta1"},
        {"adam", [](OptimizerConfig& c) { c.beta2 = 1.5; }, "optimizer.beta2"},
        {"adam", [](OptimizerConfig& c) { c.eps = 0; }, "optimizer.eps"},
        {"rmsprop", [](OptimizerConfig& c) { c.eps = -1e-8; }, "optimizer.eps"},
        {"adagrad", [](OptimizerConfig& c) { c.eps = 0; }, "optimizer.eps"},
        {"adamw", [](OptimizerConfig& c) { c.weight_decay = -0.01; }, "optimizer.weight_decay"},
        {"sgd", [](OptimizerConfig& c) { c.momentum = -0.5; }, "optimizer.momentum"},
        {"rmsprop", [](OptimizerConfig& c) { c.momentum = -0.5; }, "optimizer.momentum"},
        {"sgd", [](OptimizerConfig& c) { c.nesterov = true; }, "optimizer.nesterov"},
        {"rmsprop", [](OptimizerConfig& c) { c.alpha = 1.0; }, "optimizer.alpha"},
        {"rmsprop", [](OptimizerConfig& c) { c.alpha = -0.5; }, "optimizer.alpha"},
        {"adagrad", [](OptimizerConfig& c) { c.initial_accumulator = -1; },
         "optimizer.initial_accumulator"},
        // Fields that default to zero and mean nothing for the chosen optimizer.
        {"adam", [](OptimizerConfig& c) { c.momentum = 0.9; }, "optimizer.momentum"},
        {"rmsprop", [](OptimizerConfig& c) { c.nesterov = true; }, "optimizer.nesterov"},
        {"sgd", [](OptimizerConfig& c) { c.initial_accumulator = 0.1; },
         "optimizer.initial_accumulator"},
    };
    for (const auto& k : cases) {
      OptimizerConfig c = cfg(k.name, 0.01);
      make_optimizer(c);  // the unmutated configuration is valid
      k.mutate(c);
      try {
        make_optimizer(c);
        QFAIL(qPrintable(QString("%1: accepted a bad %2").arg(k.name, k.field)));
      } catch (const InvalidArgument& e) {
        QVERIFY2(QString(e.what()).startsWith(QString(k.field) + ":"), e.what());
      }
    }
    // Edge values that are allowed.
    OptimizerConfig ok = cfg("rmsprop", 0.01);
    ok.alpha = 0.0;
    ok.momentum = 0.0;
    make_optimizer(ok);
    ok = cfg("adam", 0.01);
    ok.beta1 = 0.0;
    make_optimizer(ok);
  }

  void unknownNameListsKnownOnes() {
    QCOMPARE(optimizer_names(),
             (std::vector<std::string>{"sgd", "adam", "adamw", "rmsprop", "adagrad"}));
    for (const auto& n : optimizer_names()) QCOMPARE(make_optimizer(cfg(n, 0.01))->name(), n);
    try {
      make_optimizer(cfg("lamb", 0.01));
      QFAIL("no throw");
    } catch (const InvalidArgument& e) {
      const QString msg(e.what());
      QVERIFY2(msg.startsWith("optimizer.name:") && msg.contains("'lamb'"), e.what());
      for (const auto& n : optimizer_names())
        QVERIFY2(msg.contains(QString::fromStdString(n)), e.what());
    }
  }
};

QTEST_APPLESS_MAIN(TestOptimizers)
#include "tst_optimizers.moc"
