// The layer kernels' CPU references (kernels/cpu: activation, layer_norm, softmax_xent, embedding,
// attention, elementwise) against independent naive loops in double written here, never the
// kernels themselves; each backward also against central finite differences, in double, of
// L = sum(y * r) for a fixed random r through the double forward. Tolerances are stated where
// they are used: each is a few float roundings of the values compared, far below any real error.
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numbers>
#include <random>
#include <vector>

#include "kernels/cpu/activation.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/layer_norm.h"
#include "kernels/cpu/softmax_xent.h"

using namespace shardlab::kernels;

namespace {

using Vec = std::vector<float>;
using DVec = std::vector<double>;

Vec uniform(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  Vec v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

DVec to_double(const Vec& v) {
  return DVec(v.begin(), v.end());
}

// |got - want| <= abs + rel * |want| everywhere; the first miss is printed.
bool close(const Vec& got, const DVec& want, double abs, double rel, const char* what) {
  if (got.size() != want.size()) {
    qWarning("%s: %zu values, expected %zu", what, got.size(), want.size());
    return false;
  }
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    if (!std::isfinite(g) || std::fabs(g - w) > abs + rel * std::fabs(w)) {
      qWarning("%s[%zu]: got %.9g, expected %.9g (tolerance %.3g + %.3g * |expected|)", what, i, g,
               w, abs, rel);
      return false;
    }
  }
  return true;
}

// Exact equality as values (0 == -0), the first difference printed.
bool same(double got, double want, const char* what) {
  if (got == want) return true;
  qWarning("%s: got %.9g, expected exactly %.9g", what, got, want);
  return false;
}

bool same(const Vec& got, const Vec& want, const char* what) {
  if (got.size() != want.size()) {
    qWarning("%s: %zu values, expected %zu", what, got.size(), want.size());
    return false;
  }
  for (size_t i = 0; i < got.size(); ++i)
    if (!(got[i] == want[i])) {
      qWarning("%s[%zu]: got %.9g, expected exactly %.9g", what, i, got[i], want[i]);
      return false;
    }
  return true;
}

// Central differences in double of a scalar function of x: (f(x + h e_i) - f(x - h e_i)) / 2h.
DVec finite_diff(DVec x, const std::function<double(const DVec&)>& f, double h = 1e-6) {
  DVec g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double keep = x[i];
    x[i] = keep + h;
    const double up = f(x);
    x[i] = keep - h;
    const double down = f(x);
    x[i] = keep;
    g[i] = (up - down) / (2 * h);
  }
  return g;
}

double dot(const DVec& a, const DVec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// ---- double references -------------------------------------------------------------------

const double kSqrt2OverPiD = std::sqrt(2.0 / std::numbers::pi);

double gelu_ref(double x) {
  return 0.5 * x * (1.0 + std::tanh(kSqrt2OverPiD * (x + 0.044715 * x * x * x)));
}

double gelu_grad_ref(double x) {
  const double t = std::tanh(kSqrt2OverPiD * (x + 0.044715 * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * kSqrt2OverPiD * (1.0 + 3.0 * 0.044715 * x * x);
}

// y = (x - mean) / sqrt(var + eps) * w + b per row (biased variance).
DVec layer_norm_ref(const DVec& x, const DVec& w, const DVec& b, int64_t rows, int64_t dim,
                    double eps, DVec* rstd = nullptr) {
  DVec y(x.size());
  if (rstd) rstd->assign(static_cast<size_t>(rows), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < dim; ++j) mean += x[r * dim + j];
    mean /= dim;
    for (int64_t j = 0; j < dim; ++j) var += (x[r * dim + j] - mean) * (x[r * dim + j] - mean);
    var /= dim;
    const double rs = 1.0 / std::sqrt(var + eps);
    if (rstd) (*rstd)[r] = rs;
    for (int64_t j = 0; j < dim; ++j) y[r * dim + j] = (x[r * dim + j] - mean) * rs * w[j] + b[j];
  }
  return y;
}

// Per row: log-sum-exp of the logits minus the target's logit.
DVec xent_rows_ref(const DVec& logits, const std::vector<int32_t>& t, int64_t rows, int64_t classes,
                   DVec* probs = nullptr) {
  DVec loss(static_cast<size_t>(rows));
  if (probs) probs->assign(logits.size(), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    double mx = -std::numeric_limits<double>::infinity();
    for (int64_t c = 0; c < classes; ++c) mx = std::max(mx, logits[r * classes + c]);
    double s = 0;
    for (int64_t c = 0; c < classes; ++c) s += std::exp(logits[r * classes + c] - mx);
    const double lse = mx + std::log(s);
    loss[r] = lse - logits[r * classes + t[r]];
    if (probs)
      for (int64_t c = 0; c < classes; ++c)
        (*probs)[r * classes + c] = std::exp(logits[r * classes + c] - lse);
  }
  return loss;
}

// Causal attention in double: probs [B, H, T, T] and att [B, T, C] from qkv [B, T, 3C].
void attention_ref(const AttentionDims& d, const DVec& qkv, DVec& probs, DVec& att) {
  const int64_t B = d.batch, T = d.steps, H = d.heads, D = d.head_dim, C = d.width();
  probs.assign(static_cast<size_t>(B * H * T * T), 0.0);
  att.assign(static_cast<size_t>(B * T * C), 0.0);
  auto at = [&](int64_t b, int64_t t, int64_t part, int64_t h, int64_t e) {
    return qkv[((b * T + t) * 3 + part) * C + h * D + e];
  };
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T; ++i) {
        DVec s(static_cast<size_t>(i + 1));
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j <= i; ++j) {
          double v = 0;
          for (int64_t e = 0; e < D; ++e) v += at(b, i, 0, h, e) * at(b, j, 1, h, e);
          s[j] = v / std::sqrt(static_cast<double>(D));
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j <= i; ++j) sum += std::exp(s[j] - mx);
        for (int64_t j = 0; j <= i; ++j) {
          const double p = std::exp(s[j] - mx) / sum;
          probs[((b * H + h) * T + i) * T + j] = p;
          for (int64_t e = 0; e < D; ++e) att[(b * T + i) * C + h * D + e] += p * at(b, j, 2, h, e);
        }
      }
}

// Its gradient written out by hand: dv = P^T datt, dP = datt v^T, dS = P (dP - rowsum(dP P)),
// dq = dS k / sqrt(d), dk = dS^T q / sqrt(d).
DVec attention_grad_ref(const AttentionDims& d, const DVec& qkv, const DVec& datt) {
  const int64_t B = d.batch, T = d.steps, H = d.heads, D = d.head_dim, C = d.width();
  DVec probs, att;
  attention_ref(d, qkv, probs, att);
  DVec g(qkv.size(), 0.0);
  auto idx = [&](int64_t b, int64_t t, int64_t part, int64_t h, int64_t e) {
    return static_cast<size_t>(((b * T + t) * 3 + part) * C + h * D + e);
  };
  const double sc = 1.0 / std::sqrt(static_cast<double>(D));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T; ++i) {
        const double* p = &probs[static_cast<size_t>(((b * H + h) * T + i) * T)];
        const double* da = &datt[static_cast<size_t>((b * T + i) * C + h * D)];
        DVec dp(static_cast<size_t>(i + 1));
        double rowsum = 0;
        for (int64_t j = 0; j <= i; ++j) {
          double v = 0;
          for (int64_t e = 0; e < D; ++e) {
            v += da[e] * qkv[idx(b, j, 2, h, e)];
            g[idx(b, j, 2, h, e)] += p[j] * da[e];
          }
          dp[j] = v;
          rowsum += v * p[j];
        }
        for (int64_t j = 0; j <= i; ++j) {
          const double ds = p[j] * (dp[j] - rowsum) * sc;
          for (int64_t e = 0; e < D; ++e) {
            g[idx(b, i, 0, h, e)] += ds * qkv[idx(b, j, 1, h, e)];
            g[idx(b, j, 1, h, e)] += ds * qkv[idx(b, i, 0, h, e)];
          }
        }
      }
  return g;
}

DVec embedding_ref(const std::vector<int32_t>& ids, const DVec& table, const DVec* pos, int64_t n,
                   int64_t steps, int64_t dim) {
  DVec y(static_cast<size_t>(n * dim));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < dim; ++j)
      y[i * dim + j] = table[ids[i] * dim + j] + (pos ? (*pos)[(i % steps) * dim + j] : 0.0);
  return y;
}

}  // namespace

class tst_KernelsLayers : public QObject {
  Q_OBJECT

 private slots:
  // ---- activations ---------------------------------------------------------------------------

  void relu() {
    Vec x = uniform(257, 1);
    x[0] = 0.0f;  // exactly 0: y = 0 and the derivative taken as 0
    x[1] = -0.0f;
    x[2] = std::numeric_limits<float>::denorm_min();
    Vec y(x.size()), dx(x.size());
    relu_forward(x.data(), y.data(), static_cast<int64_t>(x.size()));
    const Vec dy = uniform(x.size(), 2);
    relu_backward(y.data(), dy.data(), dx.data(), static_cast<int64_t>(x.size()));
    for (size_t i = 0; i < x.size(); ++i) {
      // Exact: max(x, 0) and a mask need no rounding.
      QVERIFY(same(static_cast<double>(y[i]), std::max(static_cast<double>(x[i]), 0.0), "relu y"));
      QVERIFY(
          same(static_cast<double>(dx[i]), x[i] > 0 ? static_cast<double>(dy[i]) : 0.0, "relu dx"));
    }
    QVERIFY(same(y[0], 0.0f, "relu y at 0"));
    QVERIFY(same(dx[0], 0.0f, "relu dx at 0"));
    QVERIFY(same(dx[1], 0.0f, "relu dx at -0"));
    QVERIFY(same(dx[2], dy[2], "relu dx at denorm"));
    // In place: y over x and dx over dy.
    Vec xy = x, g = dy;
    relu_forward(xy.data(), xy.data(), static_cast<int64_t>(xy.size()));
    relu_backward(xy.data(), g.data(), g.data(), static_cast<int64_t>(g.size()));
    QVERIFY(same(xy, y, "relu in place y"));
    QVERIFY(same(g, dx, "relu in place dx"));
  }

  void gelu_forward_values() {
    Vec x = uniform(301, 3, -6.0f, 6.0f);
    x[0] = 0.0f;
    x[1] = -10.0f;
    x[2] = 10.0f;
    const int64_t n = static_cast<int64_t>(x.size());
    Vec y(x.size()), t(x.size()), y2(x.size());
    gelu_forward(x.data(), y.data(), t.data(), n);
    gelu_forward(x.data(), y2.data(), nullptr, n);  // without the tanh output: same y
    QVERIFY(same(y2, y, "gelu y without tanh"));
    DVec want(x.size()), want_t(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      want[i] = gelu_ref(x[i]);
      want_t[i] = std::tanh(kSqrt2OverPiD * (x[i] + 0.044715 * x[i] * x[i] * x[i]));
    }
    // Float evaluation of a few operations: 1e-6 absolute + 1e-5 relative.
    QVERIFY(close(y, want, 1e-6, 1e-5, "gelu y"));
    QVERIFY(close(t, want_t, 1e-6, 1e-5, "gelu tanh"));
    QVERIFY(same(y[0], 0.0f, "gelu(0)"));
  }

  void gelu_tanh_precision() {
    // GELU's tanh is evaluated in double and rounded once (kernels/cpu/activation.cpp): within 1
    // ulp of tanh rounded from double, here on 200001 arguments over [-12, 12] (saturated to
    // +-1 from 9.01) and the edge cases. The argument u = sqrt(2/pi) (x + 0.044715 x^3) is
    // recomputed here in float exactly as the kernel does, so t is compared as a function of u.
    const float s2pi = static_cast<float>(std::sqrt(2.0 / std::numbers::pi));
    Vec x;
    for (int i = -100000; i <= 100000; ++i) x.push_back(static_cast<float>(i) * 1.2e-4f);
    for (const float v :
         {1e-30f, -1e-30f, 1e-45f, 3.0f, 1e30f, -1e30f, std::numeric_limits<float>::infinity(),
          -std::numeric_limits<float>::infinity()})
      x.push_back(v);
    const int64_t n = static_cast<int64_t>(x.size());
    Vec y(x.size()), t(x.size());
    gelu_forward(x.data(), y.data(), t.data(), n);
    for (size_t i = 0; i < x.size(); ++i) {
      const float v = x[i];
      const float u = s2pi * (v + 0.044715f * v * v * v);
      const auto want = static_cast<float>(std::tanh(static_cast<double>(u)));
      const float lo = std::nextafter(want, -2.0f), hi = std::nextafter(want, 2.0f);
      if (!(t[i] >= lo && t[i] <= hi) && !(std::isnan(u) && std::isnan(t[i])))
        QFAIL(qPrintable(QString("gelu tanh at x = %1 (u = %2): %3, want %4 within 1 ulp")
                             .arg(double{v}, 0, 'g', 9)
                             .arg(double{u}, 0, 'g', 9)
                             .arg(double{t[i]}, 0, 'g', 9)
                             .arg(double{want}, 0, 'g', 9)));
    }
    QVERIFY(same(t[100000], 0.0f, "tanh(0)"));
    // NaN in, NaN out.
    const float nan = std::numeric_limits<float>::quiet_NaN();
    float ny = 0, nt = 0;
    gelu_forward(&nan, &ny, &nt, 1);
    QVERIFY(std::isnan(nt) && std::isnan(ny));
    // Element by element (n = 1: no vector loop) the same bits as in one call over all of them:
    // a value does not depend on its position or on the length of the call.
    for (size_t i = 0; i < x.size(); i += 997) {
      float yi = 0, ti = 0;
      gelu_forward(&x[i], &yi, &ti, 1);
      QVERIFY(same(yi, y[i], "gelu y alone"));
      QVERIFY(same(ti, t[i], "gelu tanh alone"));
    }
  }

  void gelu_backward_values() {
    const Vec x = uniform(64, 4, -4.0f, 4.0f);
    const Vec r = uniform(x.size(), 5);
    const int64_t n = static_cast<int64_t>(x.size());
    Vec y(x.size()), t(x.size()), dx(x.size()), dx2(x.size());
    gelu_forward(x.data(), y.data(), t.data(), n);
    gelu_backward(x.data(), t.data(), r.data(), dx.data(), n);
    // Without the kept tanh it is recomputed exactly as forward does: the same bits.
    gelu_backward(x.data(), nullptr, r.data(), dx2.data(), n);
    QVERIFY(same(dx2, dx, "gelu dx recomputed tanh"));
    DVec want(x.size());
    for (size_t i = 0; i < x.size(); ++i) want[i] = r[i] * gelu_grad_ref(x[i]);
    QVERIFY(close(dx, want, 1e-6, 1e-5, "gelu dx (analytic)"));
    const DVec rd = to_double(r);
    const DVec fd = finite_diff(to_double(x), [&](const DVec& xs) {
      double s = 0;
      for (size_t i = 0; i < xs.size(); ++i) s += gelu_ref(xs[i]) * rd[i];
      return s;
    });
    // Central differences with h = 1e-6 carry ~1e-9 of their own error (truncation ~1e-12).
    QVERIFY(close(dx, fd, 1e-6, 1e-5, "gelu dx (finite differences)"));
    // dx over dy.
    Vec g = r;
    gelu_backward(x.data(), t.data(), g.data(), g.data(), n);
    QVERIFY(same(g, dx, "gelu dx in place"));
  }

  // ---- layer norm ----------------------------------------------------------------------------

  void layer_norm_data() {
    QTest::addColumn<int>("rows");
    QTest::addColumn<int>("dim");
    QTest::addColumn<double>("offset");  // |mean| / std of every row (0: mean about 0)
    QTest::newRow("5x7") << 5 << 7 << 0.0;
    QTest::newRow("rows=1") << 1 << 9 << 0.0;
    QTest::newRow("dim=1") << 4 << 1 << 0.0;
    QTest::newRow("mean 1e4 std") << 3 << 16 << 1e4;
  }

  void layer_norm() {
    QFETCH(int, rows);
    QFETCH(int, dim);
    QFETCH(double, offset);
    const float eps = 1e-5f;
    const auto n = static_cast<size_t>(rows) * dim;
    Vec x = uniform(n, 10);
    if (offset != 0.0) {
      // std about 0.58 (uniform in [-1, 1)), mean about 1e4 times that.
      for (float& v : x) v = static_cast<float>(v + offset * 0.58);
    }
    const Vec w = uniform(static_cast<size_t>(dim), 11, 0.5f, 1.5f);
    const Vec b = uniform(static_cast<size_t>(dim), 12);
    Vec y(n), xhat(n), rstd(static_cast<size_t>(rows));
    layer_norm_forward(x.data(), w.data(), b.data(), y.data(), xhat.data(), rstd.data(), rows, dim,
                       eps);
    DVec want_rstd;
    const DVec want =
        layer_norm_ref(to_double(x), to_double(w), to_double(b), rows, dim, eps, &want_rstd);
    DVec ones(static_cast<size_t>(dim), 1.0), zeros(static_cast<size_t>(dim), 0.0);
    const DVec want_xhat = layer_norm_ref(to_double(x), ones, zeros, rows, dim, eps);
    // Outputs of order 1 to 5 from float products: 1e-5 absolute + 1e-5 relative (a one-pass
    // E[x^2] - E[x]^2 in float misses by orders of magnitude more at the 1e4 offset).
    QVERIFY(close(y, want, 1e-5, 1e-5, "layer_norm y"));
    QVERIFY(close(xhat, want_xhat, 1e-5, 1e-5, "layer_norm xhat"));
    QVERIFY(close(rstd, want_rstd, 0.0, 1e-6, "layer_norm rstd"));
    if (dim == 1) {
      for (int r = 0; r < rows; ++r)
        QVERIFY(same(xhat[r], 0.0f, "xhat at dim 1"));  // a single value is its mean
    }

    // Backward of L = sum(y * r): dx, and dweight/dbias added onto nonzero starting values.
    const Vec rr = uniform(n, 13);
    const Vec w0 = uniform(static_cast<size_t>(dim), 14),
              b0 = uniform(static_cast<size_t>(dim), 15);
    Vec dx(n), dw = w0, db = b0;
    layer_norm_backward(rr.data(), xhat.data(), rstd.data(), w.data(), dx.data(), dw.data(),
                        db.data(), rows, dim);
    const DVec rd = to_double(rr), xd = to_double(x), wd = to_double(w), bd = to_double(b);
    const DVec fdx = finite_diff(
        xd, [&](const DVec& xs) { return dot(layer_norm_ref(xs, wd, bd, rows, dim, eps), rd); });
    const DVec fdw = finite_diff(
        wd, [&](const DVec& ws) { return dot(layer_norm_ref(xd, ws, bd, rows, dim, eps), rd); });
    const DVec fdb = finite_diff(
        bd, [&](const DVec& bs) { return dot(layer_norm_ref(xd, wd, bs, rows, dim, eps), rd); });
    // dx is a difference of terms of order rstd (up to 316 at dim = 1, where it is exactly 0); at
    // the 1e4 offset the finite differences themselves lose ~1e-6 to x - mean in double.
    QVERIFY(close(dx, fdx, 2e-5, 1e-4, "layer_norm dx"));
    DVec want_dw(static_cast<size_t>(dim)), want_db(static_cast<size_t>(dim));
    for (int j = 0; j < dim; ++j) {
      want_dw[j] = w0[j] + fdw[j];
      want_db[j] = b0[j] + fdb[j];
    }
    QVERIFY(close(dw, want_dw, 2e-5, 1e-5, "layer_norm dweight (adds)"));
    QVERIFY(close(db, want_db, 2e-5, 1e-5, "layer_norm dbias (adds)"));
    // ADDS: a second call adds the same gradient again.
    layer_norm_backward(rr.data(), xhat.data(), rstd.data(), w.data(), dx.data(), dw.data(),
                        db.data(), rows, dim);
    for (int j = 0; j < dim; ++j) {
      want_dw[j] = w0[j] + 2 * fdw[j];
      want_db[j] = b0[j] + 2 * fdb[j];
    }
    QVERIFY(close(dw, want_dw, 4e-5, 1e-5, "layer_norm dweight (twice)"));
    QVERIFY(close(db, want_db, 4e-5, 1e-5, "layer_norm dbias (twice)"));
  }

  // ---- softmax cross-entropy -----------------------------------------------------------------

  void softmax_xent_data() {
    QTest::addColumn<int>("rows");
    QTest::addColumn<int>("classes");
    QTest::addColumn<float>("scale");  // of the logits
    QTest::newRow("6x9") << 6 << 9 << 3.0f;
    QTest::newRow("rows=1") << 1 << 5 << 3.0f;
    QTest::newRow("classes=1") << 3 << 1 << 3.0f;
    QTest::newRow("logits around +-1e4") << 4 << 7 << 1e4f;
  }

  void softmax_xent() {
    QFETCH(int, rows);
    QFETCH(int, classes);
    QFETCH(float, scale);
    const auto n = static_cast<size_t>(rows) * classes;
    const Vec logits = uniform(n, 20, -scale, scale);
    std::vector<int32_t> t(static_cast<size_t>(rows));
    for (int r = 0; r < rows; ++r) t[r] = (r * 5 + 2) % classes;
    Vec probs(n);
    DVec loss(static_cast<size_t>(rows));
    std::vector<int32_t> correct(static_cast<size_t>(rows), -1);
    softmax_xent_forward(logits.data(), t.data(), probs.data(), loss.data(), correct.data(), rows,
                         classes);
    DVec want_probs;
    const DVec want_loss = xent_rows_ref(to_double(logits), t, rows, classes, &want_probs);
    // probs: float roundings of values <= 1; the loss in double from float differences
    // (l - max rounded to float): 1e-6 relative.
    QVERIFY(close(probs, want_probs, 1e-7, 1e-6, "softmax probs"));
    for (int r = 0; r < rows; ++r) {
      QVERIFY(std::isfinite(loss[r]));
      QVERIFY2(std::fabs(loss[r] - want_loss[r]) <= 1e-6 * (1 + std::fabs(want_loss[r])),
               qPrintable(QString("row %1: loss %2, expected %3")
                              .arg(r)
                              .arg(loss[r], 0, 'g', 12)
                              .arg(want_loss[r], 0, 'g', 12)));
      const float* lr = logits.data() + r * classes;
      int best = 0;
      for (int c = 1; c < classes; ++c)
        if (lr[c] > lr[best]) best = c;
      QCOMPARE(correct[r], best == t[r] ? 1 : 0);
    }
    if (classes == 1) {
      for (float p : probs) QVERIFY(same(p, 1.0f, "probs at 1 class"));
      for (double l : loss) QVERIFY(same(l, 0.0, "loss at 1 class"));
    }

    // Backward with scale = 1/rows: the gradient of the mean loss.
    const float s = 1.0f / static_cast<float>(rows);
    Vec dl(n);
    softmax_xent_backward(probs.data(), t.data(), dl.data(), rows, classes, s);
    const DVec fd = finite_diff(to_double(logits), [&](const DVec& ls) {
      const DVec rl = xent_rows_ref(ls, t, rows, classes);
      double sum = 0;
      for (double v : rl) sum += v;
      return sum * s;
    });
    if (scale < 100.0f) {
      QVERIFY(close(dl, fd, 1e-7, 1e-5, "softmax dlogits (finite differences)"));
    } else {
      // At +-1e4 a step of 1e-6 is lost in the logits' size; the exact (p - onehot) / rows then.
      DVec want(n);
      for (size_t i = 0; i < n; ++i) want[i] = want_probs[i] * s;
      for (int r = 0; r < rows; ++r) want[r * classes + t[r]] -= s;
      QVERIFY(close(dl, want, 1e-7, 1e-6, "softmax dlogits"));
    }
    // In place over probs.
    Vec p2 = probs;
    softmax_xent_backward(p2.data(), t.data(), p2.data(), rows, classes, s);
    QVERIFY(same(p2, dl, "softmax dlogits in place"));
  }

  void softmax_xent_extremes() {
    // Rows with logits of +-1e4: no overflow, the losses right to the last digit that matters.
    const Vec logits = {1e4f,  -1e4f, 1e4f - 1.0f,  // target 1: loss ~ 2e4
                        -1e4f, -1e4f, -1e4f,        // all equal: log 3
                        3.0f,  1e4f,  1e4f};        // tie at the top: the first counts
    const std::vector<int32_t> t = {1, 0, 2};
    Vec probs(9);
    DVec loss(3);
    std::vector<int32_t> correct(3);
    softmax_xent_forward(logits.data(), t.data(), probs.data(), loss.data(), correct.data(), 3, 3);
    for (float p : probs) QVERIFY(std::isfinite(p));
    const double lse0 = 1e4 + std::log(1.0 + std::exp(-1.0));
    QVERIFY(std::fabs(loss[0] - (lse0 + 1e4)) <= 1e-9 * 2e4);
    QVERIFY(std::fabs(loss[1] - std::log(3.0)) <= 1e-12);
    QVERIFY(std::fabs(loss[2] - std::log(2.0)) <= 1e-12);
    QVERIFY(same(probs[1], 0.0f, "underflowed prob"));   // exp(-2e4) underflows to exactly 0
    QCOMPARE(correct, (std::vector<int32_t>{0, 1, 0}));  // row 2: the max is first at class 1
  }

  // ---- embedding -----------------------------------------------------------------------------

  void embedding_data() {
    QTest::addColumn<int>("batch");
    QTest::addColumn<int>("steps");
    QTest::addColumn<bool>("with_pos");
    QTest::newRow("3x4, pos") << 3 << 4 << true;
    QTest::newRow("3x4, no pos") << 3 << 4 << false;
    QTest::newRow("T=1, pos") << 5 << 1 << true;
    QTest::newRow("one row") << 1 << 1 << true;
  }

  void embedding() {
    QFETCH(int, batch);
    QFETCH(int, steps);
    QFETCH(bool, with_pos);
    const int64_t num = 6, dim = 3, n = int64_t{batch} * steps;
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) ids[i] = static_cast<int32_t>((i * 7 + 1) % 4);  // repeats
    const Vec table = uniform(static_cast<size_t>(num * dim), 30);
    const Vec pos = uniform(static_cast<size_t>(steps * dim), 31);
    const float* pp = with_pos ? pos.data() : nullptr;
    Vec y(static_cast<size_t>(n * dim));
    embedding_forward(ids.data(), table.data(), pp, y.data(), n, steps, dim);
    const DVec posd = to_double(pos);
    const DVec want =
        embedding_ref(ids, to_double(table), with_pos ? &posd : nullptr, n, steps, dim);
    // A copy, or one float addition: the double sum rounded once, exactly.
    for (size_t i = 0; i < y.size(); ++i)
      QVERIFY(same(y[i], static_cast<float>(want[i]), "embedding y"));

    // Backward of L = sum(y * r), added onto nonzero gradients.
    const Vec rr = uniform(y.size(), 32);
    const Vec dt0 = uniform(table.size(), 33), dp0 = uniform(pos.size(), 34);
    Vec dt = dt0, dp = dp0;
    embedding_backward(ids.data(), rr.data(), dt.data(), with_pos ? dp.data() : nullptr, n, steps,
                       dim);
    const DVec rd = to_double(rr);
    const DVec fdt = finite_diff(to_double(table), [&](const DVec& ts) {
      return dot(embedding_ref(ids, ts, with_pos ? &posd : nullptr, n, steps, dim), rd);
    });
    const DVec fdp = finite_diff(posd, [&](const DVec& ps) {
      return dot(embedding_ref(ids, to_double(table), &ps, n, steps, dim), rd);
    });
    DVec want_dt(dt0.size()), want_dp(dp0.size());
    for (size_t i = 0; i < dt0.size(); ++i) want_dt[i] = dt0[i] + fdt[i];
    for (size_t i = 0; i < dp0.size(); ++i) want_dp[i] = dp0[i] + (with_pos ? fdp[i] : 0.0);
    // Sums of at most n floats of order 1: 1e-5 absolute.
    QVERIFY(close(dt, want_dt, 1e-5, 0.0, "embedding dtable"));
    QVERIFY(close(dp, want_dp, 1e-5, 0.0, "embedding dpos"));
    if (!with_pos) QVERIFY(same(dp, dp0, "dpos untouched"));
    // The order contract: each element's contributions added in increasing row order, in float.
    Vec order_dt = dt0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < dim; ++j) order_dt[ids[i] * dim + j] += rr[i * dim + j];
    QVERIFY(same(dt, order_dt, "dtable in row order"));
    // ADDS: twice doubles the added gradient.
    embedding_backward(ids.data(), rr.data(), dt.data(), with_pos ? dp.data() : nullptr, n, steps,
                       dim);
    for (size_t i = 0; i < dt0.size(); ++i) want_dt[i] = dt0[i] + 2 * fdt[i];
    for (size_t i = 0; i < dp0.size(); ++i) want_dp[i] = dp0[i] + (with_pos ? 2 * fdp[i] : 0.0);
    QVERIFY(close(dt, want_dt, 2e-5, 0.0, "embedding dtable (twice)"));
    QVERIFY(close(dp, want_dp, 2e-5, 0.0, "embedding dpos (twice)"));
  }

  void embedding_grad_index_data() {
    QTest::addColumn<std::vector<int32_t>>("ids");
    QTest::addColumn<int>("num");
    QTest::newRow("repeats and gaps") << std::vector<int32_t>{5, 1, 5, 0, 7, 1, 5, 3} << 9;
    QTest::newRow("one id") << std::vector<int32_t>{2, 2, 2} << 3;
    QTest::newRow("all distinct, reversed") << std::vector<int32_t>{3, 2, 1, 0} << 4;
    QTest::newRow("one row") << std::vector<int32_t>{0} << 1;
    QTest::newRow("empty") << std::vector<int32_t>{} << 4;
    std::vector<int32_t> big(500);
    std::mt19937 gen(40);
    for (auto& v : big) v = static_cast<int32_t>(gen() % 37);
    QTest::newRow("500 random of 37") << big << 37;
  }

  void embedding_grad_index() {
    QFETCH(std::vector<int32_t>, ids);
    QFETCH(int, num);
    const auto n = static_cast<int64_t>(ids.size());
    const EmbeddingGradIndex index = shardlab::kernels::embedding_grad_index(ids.data(), n, num);
    QCOMPARE(static_cast<int64_t>(index.order.size()), n);
    QCOMPARE(static_cast<int64_t>(index.seg_start.size()), index.segments() + 1);
    QCOMPARE(index.seg_start.front(), 0);
    QCOMPARE(static_cast<int64_t>(index.seg_start.back()), n);
    std::vector<int> seen(static_cast<size_t>(n), 0);
    for (int64_t s = 0; s < index.segments(); ++s) {
      const int32_t begin = index.seg_start[s], end = index.seg_start[s + 1];
      QVERIFY2(begin < end, "an empty segment");
      if (s > 0) QVERIFY2(index.seg_id[s - 1] < index.seg_id[s], "seg_id not increasing");
      for (int32_t k = begin; k < end; ++k) {
        const int32_t row = index.order[k];
        QVERIFY(row >= 0 && row < n);
        ++seen[row];
        QCOMPARE(ids[row], index.seg_id[s]);
        if (k > begin) QVERIFY2(index.order[k - 1] < row, "rows of a segment not increasing");
      }
    }
    for (int64_t i = 0; i < n; ++i) QCOMPARE(seen[i], 1);  // every row exactly once
    std::vector<int32_t> distinct = ids;
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    QCOMPARE(index.seg_id, distinct);
  }

  // ---- attention -----------------------------------------------------------------------------

  void attention_data() {
    QTest::addColumn<int>("batch");
    QTest::addColumn<int>("steps");
    QTest::addColumn<int>("heads");
    QTest::addColumn<int>("head_dim");
    QTest::newRow("B2 T3 H2 d2") << 2 << 3 << 2 << 2;
    QTest::newRow("B1 T5 H1 d4") << 1 << 5 << 1 << 4;
    QTest::newRow("T=1") << 2 << 1 << 2 << 3;
    QTest::newRow("d=1") << 1 << 4 << 3 << 1;
  }

  void attention() {
    QFETCH(int, batch);
    QFETCH(int, steps);
    QFETCH(int, heads);
    QFETCH(int, head_dim);
    AttentionDims d;
    d.batch = batch;
    d.steps = steps;
    d.heads = heads;
    d.head_dim = head_dim;
    const int64_t B = batch, T = steps, H = heads, C = d.width();
    const Vec qkv = uniform(static_cast<size_t>(B * T * 3 * C), 50, -1.5f, 1.5f);
    Vec probs(static_cast<size_t>(B * H * T * T), -1.0f), att(static_cast<size_t>(B * T * C));
    causal_attention_forward(d, qkv.data(), probs.data(), att.data());
    DVec want_p, want_a;
    attention_ref(d, to_double(qkv), want_p, want_a);
    // Float softmax and GEMMs over at most 5 terms of order 1: 1e-6 on probs, 1e-5 on att.
    QVERIFY(close(probs, want_p, 1e-6, 1e-5, "attention probs"));
    QVERIFY(close(att, want_a, 1e-5, 1e-5, "attention att"));
    for (int64_t bh = 0; bh < B * H; ++bh)
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = i + 1; j < T; ++j) {
          const float p = probs[(bh * T + i) * T + j];
          QVERIFY2(p == 0.0f && !std::signbit(p), "a weight above the diagonal is not exactly 0");
        }

    // Backward of L = sum(att * r), with dqkv and the scratch prefilled with garbage.
    const Vec rr = uniform(att.size(), 51);
    Vec dqkv(qkv.size(), 7.0f), scratch(static_cast<size_t>(T * T), 7.0f);
    causal_attention_backward(d, qkv.data(), probs.data(), rr.data(), dqkv.data(), scratch.data());
    const DVec rd = to_double(rr);
    const DVec analytic = attention_grad_ref(d, to_double(qkv), rd);
    const DVec fd = finite_diff(to_double(qkv), [&](const DVec& xs) {
      DVec p, a;
      attention_ref(d, xs, p, a);
      return dot(a, rd);
    });
    QVERIFY(close(dqkv, analytic, 1e-5, 1e-4, "attention dqkv (analytic)"));
    QVERIFY(close(dqkv, fd, 1e-5, 1e-4, "attention dqkv (finite differences)"));
    if (T == 1) {
      // One position: att = v, so dq = dk = 0 exactly and dv = datt.
      for (int64_t b = 0; b < B; ++b)
        for (int64_t c = 0; c < C; ++c) {
          QVERIFY(same(dqkv[b * 3 * C + c], 0.0f, "dq at T=1"));
          QVERIFY(same(dqkv[b * 3 * C + C + c], 0.0f, "dk at T=1"));
          QVERIFY(same(dqkv[b * 3 * C + 2 * C + c], rr[b * C + c], "dv at T=1"));
        }
    }
    // Overwrites (does not add): a second call gives the same bits.
    Vec again = dqkv;
    causal_attention_backward(d, qkv.data(), probs.data(), rr.data(), again.data(), scratch.data());
    QVERIFY(same(again, dqkv, "dqkv again"));
  }

  // ---- element-wise --------------------------------------------------------------------------

  void elementwise() {
    const Vec a = uniform(37, 60), b = uniform(37, 61);
    Vec out(a.size());
    add(a.data(), b.data(), out.data(), 37);
    // One float addition: the exact double sum rounded once.
    for (size_t i = 0; i < a.size(); ++i)
      QVERIFY(same(out[i], static_cast<float>(double{a[i]} + double{b[i]}), "add"));
    Vec in_a = a, in_b = b;
    add(in_a.data(), b.data(), in_a.data(), 37);
    add(a.data(), in_b.data(), in_b.data(), 37);
    QVERIFY(same(in_a, out, "add over a"));
    QVERIFY(same(in_b, out, "add over b"));

    Vec x = a;
    scale(x.data(), 37, 0.25f);  // a power of two: exact
    for (size_t i = 0; i < a.size(); ++i) QVERIFY(same(x[i], a[i] * 0.25f, "scale by 0.25"));
    x = a;
    scale(x.data(), 37, 3.0f);
    for (size_t i = 0; i < a.size(); ++i)
      QVERIFY(same(x[i], static_cast<float>(3.0 * a[i]), "scale by 3"));

    const int64_t rows = 5, cols = 7;
    const Vec y0 = uniform(rows * cols, 62), bias = uniform(cols, 63),
              dy = uniform(rows * cols, 64);
    Vec y = y0;
    bias_add(y.data(), bias.data(), rows, cols);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        QVERIFY(same(y[r * cols + c], static_cast<float>(double{y0[r * cols + c]} + bias[c]),
                     "bias_add"));

    const Vec db0 = uniform(cols, 65);
    Vec db = db0;
    bias_grad(dy.data(), db.data(), rows, cols);
    DVec want(static_cast<size_t>(cols));
    for (int64_t c = 0; c < cols; ++c) {
      want[c] = db0[c];
      for (int64_t r = 0; r < rows; ++r) want[c] += dy[r * cols + c];
    }
    // Five float additions of values below 1: 1e-6 absolute.
    QVERIFY(close(db, want, 1e-6, 0.0, "bias_grad"));
    // ADDS: twice adds the column sums twice.
    bias_grad(dy.data(), db.data(), rows, cols);
    for (int64_t c = 0; c < cols; ++c) want[c] = 2 * want[c] - db0[c];
    QVERIFY(close(db, want, 2e-6, 0.0, "bias_grad (twice)"));
  }

  void bias_grad_order() {
    // The order contract: rows added in increasing order onto the existing value, bit for bit.
    // Magnitudes from 1e-3 to 1e3 make the rounding depend on the order. Row counts around the
    // kernel's four-row passes, column counts around the vector width.
    for (const int64_t rows : {64, 67, 3, 1})
      for (const int64_t cols : {5, 37}) {
        Vec dy = uniform(rows * cols, 66);
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < cols; ++c) dy[r * cols + c] *= std::pow(10.0f, (r % 7) - 3);
        const Vec db0 = uniform(cols, 67);
        Vec db = db0, ordered = db0;
        bias_grad(dy.data(), db.data(), rows, cols);
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < cols; ++c) ordered[c] += dy[r * cols + c];
        QVERIFY(same(db, ordered, "bias_grad in row order"));
      }
  }

  void layer_norm_order() {
    // The order contract of kernels/cpu/layer_norm.h, bit for bit against a one-row-at-a-time
    // transcription of it: mean and variance in double left to right, the backward's two sums in
    // float left to right, dweight and dbias the rows in increasing order onto the existing value
    // (so the CUDA kernels, which keep that order, give the same bits). Magnitudes from 1e-3 to 1e3
    // make every rounding depend on the order; row counts around the kernel's row groups.
    for (const int64_t rows : {11, 8, 3, 1})
      for (const int64_t dim : {33, 64, 1}) {
        const auto n = static_cast<size_t>(rows * dim);
        Vec x = uniform(n, 80), dy = uniform(n, 81);
        for (size_t i = 0; i < n; ++i) {
          x[i] *= std::pow(10.0f, static_cast<float>(i % 7) - 3);
          dy[i] *= std::pow(10.0f, static_cast<float>(i % 5) - 2);
        }
        const Vec w = uniform(static_cast<size_t>(dim), 82, 0.5f, 1.5f);
        const Vec b = uniform(static_cast<size_t>(dim), 83);
        const Vec dw0 = uniform(static_cast<size_t>(dim), 84),
                  db0 = uniform(static_cast<size_t>(dim), 85);
        const float eps = 1e-5f;
        Vec y(n), xhat(n), rstd(static_cast<size_t>(rows)), dx(n), dw = dw0, db = db0;
        layer_norm_forward(x.data(), w.data(), b.data(), y.data(), xhat.data(), rstd.data(), rows,
                           dim, eps);
        layer_norm_backward(dy.data(), xhat.data(), rstd.data(), w.data(), dx.data(), dw.data(),
                            db.data(), rows, dim);
        Vec wy(n), wxhat(n), wrstd(static_cast<size_t>(rows)), wdx(n), wdw = dw0, wdb = db0;
        for (int64_t r = 0; r < rows; ++r) {
          const float* xr = x.data() + r * dim;
          double mean = 0, var = 0;
          for (int64_t j = 0; j < dim; ++j) mean += xr[j];
          mean *= 1.0 / static_cast<double>(dim);
          for (int64_t j = 0; j < dim; ++j) var += (xr[j] - mean) * (xr[j] - mean);
          var *= 1.0 / static_cast<double>(dim);
          const float rs = static_cast<float>(1.0 / std::sqrt(var + eps));
          wrstd[r] = rs;
          for (int64_t j = 0; j < dim; ++j) {
            wxhat[r * dim + j] = static_cast<float>(xr[j] - mean) * rs;
            wy[r * dim + j] = wxhat[r * dim + j] * w[j] + b[j];
          }
          float sum_g = 0, sum_gh = 0;
          for (int64_t j = 0; j < dim; ++j) {
            const float g = dy[r * dim + j] * w[j];
            sum_g += g;
            sum_gh += g * wxhat[r * dim + j];
            wdw[j] += dy[r * dim + j] * wxhat[r * dim + j];
            wdb[j] += dy[r * dim + j];
          }
          const float inv_dim = 1.0f / static_cast<float>(dim);
          const float mean_g = sum_g * inv_dim, mean_gh = sum_gh * inv_dim;
          for (int64_t j = 0; j < dim; ++j)
            wdx[r * dim + j] =
                rs * (dy[r * dim + j] * w[j] - mean_g - wxhat[r * dim + j] * mean_gh);
        }
        QVERIFY(same(y, wy, "layer_norm y"));
        QVERIFY(same(xhat, wxhat, "layer_norm xhat"));
        QVERIFY(same(rstd, wrstd, "layer_norm rstd"));
        QVERIFY(same(dx, wdx, "layer_norm dx"));
        QVERIFY(same(dw, wdw, "layer_norm dweight in row order"));
        QVERIFY(same(db, wdb, "layer_norm dbias in row order"));
      }
  }
};

QTEST_APPLESS_MAIN(tst_KernelsLayers)
#include "tst_kernels_layers.moc"
