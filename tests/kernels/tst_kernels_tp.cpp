// The tensor-parallel kernels' CPU references (kernels/cpu: vocab_xent, range_embedding) against
// plain loops written here, never the kernels themselves: each a straightforward transcription of
// the maths in the same order of operations and with the same float/double conversions as the
// engine's loops they replaced (engine/tensor_parallel), so every result must agree BIT FOR BIT.
// Sizes include an empty local slice (cols = 0), one column, ties for the maximum, targets and ids
// outside this rank's range, repeated ids and an empty row range.
#include <QtTest>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/range_embedding.h"
#include "kernels/cpu/vocab_xent.h"

namespace kern = shardlab::kernels;

namespace {

using Vec = std::vector<float>;
using DVec = std::vector<double>;
using IVec = std::vector<int32_t>;

constexpr float kInf = std::numeric_limits<float>::infinity();

Vec normal(size_t n, uint32_t seed, float sd = 3.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, sd);
  Vec v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// Bitwise equality (so -0 != +0), the first difference printed.
template <class T, class Bits>
bool same_bits(const std::vector<T>& got, const std::vector<T>& want, const char* what) {
  if (got.size() != want.size()) {
    qWarning("%s: %zu values, expected %zu", what, got.size(), want.size());
    return false;
  }
  for (size_t i = 0; i < got.size(); ++i)
    if (std::bit_cast<Bits>(got[i]) != std::bit_cast<Bits>(want[i])) {
      qWarning("%s[%zu]: got %.17g, expected bit for bit %.17g", what, i,
               static_cast<double>(got[i]), static_cast<double>(want[i]));
      return false;
    }
  return true;
}
bool same(const Vec& got, const Vec& want, const char* what) {
  return same_bits<float, uint32_t>(got, want, what);
}
bool same(const DVec& got, const DVec& want, const char* what) {
  return same_bits<double, uint64_t>(got, want, what);
}

// ---- the vocabulary-parallel cross-entropy: one rank's slice -----------------------------------

// Logits [rows, cols] of this rank's columns [vocab_begin, vocab_begin + cols) of a vocabulary of
// vocab_begin + cols + 7 ids, targets anywhere in it (some here, some elsewhere), and row 0 with a
// tie for the maximum at columns 0 and 1 (when cols >= 2).
struct Slice {
  int64_t rows, cols, vocab_begin;
  Vec logits;
  IVec targets;
};

Slice make_slice(int rows, int cols, int vocab_begin) {
  Slice s{rows, cols, vocab_begin, {}, {}};
  const auto seed = static_cast<uint32_t>(rows * 1000 + cols * 7 + vocab_begin);
  s.logits = normal(static_cast<size_t>(rows * cols), seed);
  if (cols >= 2) s.logits[0] = s.logits[1] = 20.0f;
  std::mt19937 gen(seed + 1);
  const auto vocab = static_cast<uint32_t>(vocab_begin + cols + 7);
  s.targets.resize(static_cast<size_t>(rows));
  for (int32_t& t : s.targets) t = static_cast<int32_t>(gen() % vocab);
  if (rows >= 2 && cols >= 1) s.targets[1] = vocab_begin;            // held here, first column
  if (rows >= 3 && vocab_begin > 0) s.targets[2] = vocab_begin - 1;  // just below the slice
  if (rows >= 4) s.targets[3] = vocab_begin + cols;                  // just past it
  return s;
}

void vocab_rows() {
  QTest::addColumn<int>("rows");
  QTest::addColumn<int>("cols");
  QTest::addColumn<int>("vocab_begin");
  QTest::newRow("empty slice 5x0") << 5 << 0 << 96;
  QTest::newRow("empty slice 1x0 at 0") << 1 << 0 << 0;
  QTest::newRow("1x1 at 0") << 1 << 1 << 0;
  QTest::newRow("4x1 at 3") << 4 << 1 << 3;
  QTest::newRow("6x9 at 0") << 6 << 9 << 0;
  QTest::newRow("7x33 at 33") << 7 << 33 << 33;
  QTest::newRow("64x257 at 1000") << 64 << 257 << 1000;
  QTest::newRow("3x1000 at 12345") << 3 << 1000 << 12345;
}

// The row maximum: the first column c with best < l_c (std::max_element's rule), -inf when empty.
Vec ref_row_max(const Slice& s) {
  Vec mx(static_cast<size_t>(s.rows), -kInf);
  for (int64_t r = 0; r < s.rows; ++r)
    for (int64_t c = 0; c < s.cols; ++c) {
      const float l = s.logits[static_cast<size_t>(r * s.cols + c)];
      if (c == 0 || mx[static_cast<size_t>(r)] < l) mx[static_cast<size_t>(r)] = l;
    }
  return mx;
}

// A stand-in for the all-reduced maximum: this rank's, or larger where another rank held more.
Vec global_max(const Slice& s) {
  Vec mx = ref_row_max(s);
  for (size_t r = 0; r < mx.size(); ++r)
    if (r % 2 == 1 || mx[r] == -kInf) mx[r] = std::max(mx[r], 6.5f + static_cast<float>(r));
  return mx;
}

}  // namespace

class tst_KernelsTp : public QObject {
  Q_OBJECT

 private slots:
  void vocab_xent_row_max_data() { vocab_rows(); }
  void vocab_xent_row_max() {
    QFETCH(int, rows);
    QFETCH(int, cols);
    QFETCH(int, vocab_begin);
    const Slice s = make_slice(rows, cols, vocab_begin);
    Vec got(static_cast<size_t>(rows), 123.0f);
    kern::vocab_xent_row_max(s.logits.data(), got.data(), s.rows, s.cols);
    QVERIFY(same(got, ref_row_max(s), "row_max"));
    if (cols == 0)
      for (const float m : got) QCOMPARE(m, -kInf);
  }

  void vocab_xent_partials_data() { vocab_rows(); }
  void vocab_xent_partials() {
    QFETCH(int, rows);
    QFETCH(int, cols);
    QFETCH(int, vocab_begin);
    const Slice s = make_slice(rows, cols, vocab_begin);
    const Vec mx = global_max(s);
    Vec sum(static_cast<size_t>(rows), 123.0f), target(static_cast<size_t>(rows), 123.0f);
    kern::vocab_xent_partials(s.logits.data(), mx.data(), s.targets.data(), s.vocab_begin,
                              sum.data(), target.data(), s.rows, s.cols);

    Vec want_sum(static_cast<size_t>(rows)), want_target(static_cast<size_t>(rows));
    int held = 0;
    for (int64_t r = 0; r < s.rows; ++r) {
      const auto i = static_cast<size_t>(r);
      double acc = 0;  // in double, left to right, of exp of the float difference
      for (int64_t c = 0; c < s.cols; ++c) {
        const float d = s.logits[static_cast<size_t>(r * s.cols + c)] - mx[i];
        acc = acc + std::exp(static_cast<double>(d));
      }
      want_sum[i] = static_cast<float>(acc);
      const int64_t global = s.targets[i];
      if (global >= s.vocab_begin && global < s.vocab_begin + s.cols) {
        want_target[i] = s.logits[static_cast<size_t>(r * s.cols + (global - s.vocab_begin))];
        ++held;
      } else {
        want_target[i] = 0.0f;
      }
    }
    QVERIFY(same(sum, want_sum, "sum_exp"));
    QVERIFY(same(target, want_target, "target_logit"));
    if (cols == 0) QCOMPARE(held, 0);
    if (rows >= 2 && cols >= 1) QVERIFY(held >= 1);  // row 1's target is held here
  }

  void vocab_xent_probs_data() { vocab_rows(); }
  void vocab_xent_probs() {
    QFETCH(int, rows);
    QFETCH(int, cols);
    QFETCH(int, vocab_begin);
    const Slice s = make_slice(rows, cols, vocab_begin);
    // Stand-ins for the all-reduced sums: this rank's partials plus what other ranks added.
    const Vec mx = global_max(s);
    Vec sum(static_cast<size_t>(rows)), target(static_cast<size_t>(rows));
    kern::vocab_xent_partials(s.logits.data(), mx.data(), s.targets.data(), s.vocab_begin,
                              sum.data(), target.data(), s.rows, s.cols);
    const Vec other = normal(static_cast<size_t>(rows), static_cast<uint32_t>(rows + cols), 1.0f);
    for (size_t r = 0; r < sum.size(); ++r) {
      sum[r] += 0.5f + std::fabs(other[r]);
      if (target[r] == 0.0f) target[r] = other[r];
    }

    Vec probs(static_cast<size_t>(rows * cols), 123.0f);
    DVec loss(static_cast<size_t>(rows), 123.0);
    kern::vocab_xent_probs(s.logits.data(), mx.data(), sum.data(), target.data(), probs.data(),
                           loss.data(), s.rows, s.cols);

    Vec want_probs(probs.size());
    DVec want_loss(loss.size());
    for (int64_t r = 0; r < s.rows; ++r) {
      const auto i = static_cast<size_t>(r);
      const double lse =
          static_cast<double>(mx[i]) + std::log(static_cast<double>(sum[i]));  // in double
      for (int64_t c = 0; c < s.cols; ++c) {
        const auto k = static_cast<size_t>(r * s.cols + c);
        want_probs[k] = static_cast<float>(std::exp(static_cast<double>(s.logits[k]) - lse));
      }
      want_loss[i] = lse - static_cast<double>(target[i]);
    }
    QVERIFY(same(probs, want_probs, "probs"));
    QVERIFY(same(loss, want_loss, "row_loss"));
    for (const double l : loss) QVERIFY(std::isfinite(l));
  }

  void vocab_xent_backward_data() { vocab_rows(); }
  void vocab_xent_backward() {
    QFETCH(int, rows);
    QFETCH(int, cols);
    QFETCH(int, vocab_begin);
    const Slice s = make_slice(rows, cols, vocab_begin);
    const Vec probs = normal(static_cast<size_t>(rows * cols), static_cast<uint32_t>(rows), 0.2f);
    const float inv_rows = 1.0f / static_cast<float>(rows);

    Vec want(probs.size());
    for (int64_t r = 0; r < s.rows; ++r)
      for (int64_t c = 0; c < s.cols; ++c) {
        const auto k = static_cast<size_t>(r * s.cols + c);
        // Two roundings: the scaled probability is stored, then the target's 1/R subtracted.
        const float scaled = probs[k] * inv_rows;
        const bool is_target = s.vocab_begin + c == s.targets[static_cast<size_t>(r)];
        want[k] = is_target ? scaled - inv_rows : scaled;
      }

    Vec got(probs.size(), 123.0f);
    kern::vocab_xent_backward(probs.data(), s.targets.data(), s.vocab_begin, got.data(), s.rows,
                              s.cols, inv_rows);
    QVERIFY(same(got, want, "dlogits"));
    // In place (dlogits aliasing probs), as the header allows.
    Vec in_place = probs;
    kern::vocab_xent_backward(in_place.data(), s.targets.data(), s.vocab_begin, in_place.data(),
                              s.rows, s.cols, inv_rows);
    QVERIFY(same(in_place, want, "dlogits in place"));
  }

  void vocab_xent_argmax_neg_id_data() { vocab_rows(); }
  void vocab_xent_argmax_neg_id() {
    QFETCH(int, rows);
    QFETCH(int, cols);
    QFETCH(int, vocab_begin);
    const Slice s = make_slice(rows, cols, vocab_begin);
    // The global maximum: this rank's on even rows (present here), mostly larger on odd rows.
    const Vec mx = global_max(s);
    Vec got(static_cast<size_t>(rows), 123.0f);
    kern::vocab_xent_argmax_neg_id(s.logits.data(), mx.data(), s.vocab_begin, got.data(), s.rows,
                                   s.cols);

    Vec want(got.size());
    for (int64_t r = 0; r < s.rows; ++r) {
      const auto i = static_cast<size_t>(r);
      int64_t first = -1;
      for (int64_t c = 0; c < s.cols && first < 0; ++c)
        if (s.logits[static_cast<size_t>(r * s.cols + c)] == mx[i]) first = c;
      want[i] = first >= 0 ? -static_cast<float>(s.vocab_begin + first) : -kInf;
    }
    QVERIFY(same(got, want, "neg_best"));
    // Row 0's tie at columns 0 and 1: the lower id wins.
    if (cols >= 2) QCOMPARE(got[0], -static_cast<float>(vocab_begin));
  }

  // ---- the range-masked embedding ---------------------------------------------------------------

  void range_embedding_data() {
    QTest::addColumn<int>("vocab");
    QTest::addColumn<int>("begin");
    QTest::addColumn<int>("end");
    QTest::addColumn<int>("batch");
    QTest::addColumn<int>("steps");
    QTest::addColumn<int>("dim");
    QTest::addColumn<bool>("with_pos");
    QTest::newRow("whole table") << 11 << 0 << 11 << 3 << 5 << 4 << true;
    QTest::newRow("middle rows") << 50 << 17 << 34 << 4 << 9 << 7 << true;
    QTest::newRow("first rows, no positions") << 50 << 0 << 17 << 4 << 9 << 7 << false;
    QTest::newRow("last rows, dim 1") << 20 << 13 << 20 << 5 << 6 << 1 << true;
    QTest::newRow("one row") << 9 << 4 << 5 << 2 << 8 << 3 << true;
    QTest::newRow("empty range") << 9 << 9 << 9 << 2 << 8 << 3 << true;
    QTest::newRow("one token") << 9 << 2 << 6 << 1 << 1 << 33 << true;
    QTest::newRow("768 wide") << 1000 << 250 << 500 << 3 << 17 << 768 << true;
  }

  void range_embedding() {
    QFETCH(int, vocab);
    QFETCH(int, begin);
    QFETCH(int, end);
    QFETCH(int, batch);
    QFETCH(int, steps);
    QFETCH(int, dim);
    QFETCH(bool, with_pos);
    const int64_t n = int64_t{batch} * steps, rows = end - begin;
    const auto seed = static_cast<uint32_t>(vocab * 31 + begin * 7 + dim);
    std::mt19937 gen(seed);
    // Half the ids from a few values inside the range (repeated ids, several rows per id), the
    // rest anywhere in the vocabulary (many outside the range).
    IVec ids(static_cast<size_t>(n));
    for (int32_t& id : ids) {
      const bool few = gen() % 2 == 0 && rows > 0;
      id = few ? static_cast<int32_t>(begin +
                                      gen() % std::min<uint32_t>(3, static_cast<uint32_t>(rows)))
               : static_cast<int32_t>(gen() % static_cast<uint32_t>(vocab));
    }
    const Vec table = normal(static_cast<size_t>(rows * dim), seed + 1, 1.0f),
              dy = normal(static_cast<size_t>(n * dim), seed + 2, 1.0f),
              dtable0 = normal(static_cast<size_t>(rows * dim), seed + 3, 1.0f),
              dpos0 = normal(static_cast<size_t>(steps * dim), seed + 4, 1.0f);
    const auto in_range = [&](int32_t id) { return id >= begin && id < end; };

    // Forward: a copy of the local row, or zeros.
    Vec want_y(static_cast<size_t>(n * dim));
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < dim; ++j) {
        const int32_t id = ids[static_cast<size_t>(i)];
        want_y[static_cast<size_t>(i * dim + j)] =
            in_range(id) ? table[static_cast<size_t>((id - begin) * dim + j)] : 0.0f;
      }
    Vec y(want_y.size(), 123.0f);
    kern::range_embedding_forward(ids.data(), table.data(), begin, end, y.data(), n, dim);
    QVERIFY(same(y, want_y, "y"));

    // Backward: every output element adds its rows in increasing row order onto its start value.
    Vec want_dtable = dtable0, want_dpos = dpos0;
    for (int64_t row = 0; row < rows; ++row)
      for (int64_t j = 0; j < dim; ++j) {
        float acc = want_dtable[static_cast<size_t>(row * dim + j)];
        for (int64_t i = 0; i < n; ++i)
          if (ids[static_cast<size_t>(i)] == begin + row)
            acc += dy[static_cast<size_t>(i * dim + j)];
        want_dtable[static_cast<size_t>(row * dim + j)] = acc;
      }
    for (int64_t t = 0; t < steps; ++t)
      for (int64_t j = 0; j < dim; ++j) {
        float acc = want_dpos[static_cast<size_t>(t * dim + j)];
        for (int64_t i = t; i < n; i += steps) acc += dy[static_cast<size_t>(i * dim + j)];
        want_dpos[static_cast<size_t>(t * dim + j)] = acc;
      }
    Vec dtable = dtable0, dpos = dpos0;
    kern::range_embedding_backward(ids.data(), dy.data(), begin, end, dtable.data(),
                                   with_pos ? dpos.data() : nullptr, n, steps, dim);
    QVERIFY(same(dtable, want_dtable, "dtable"));
    QVERIFY(same(dpos, with_pos ? want_dpos : dpos0, "dpos"));

    // The index the CUDA scatter-add walks: segments of local rows, increasing, each listing its
    // rows in increasing order, exactly the rows in range. Walking it as the GPU does (one
    // (segment, column) at a time) gives the same bits.
    const kern::EmbeddingGradIndex index =
        kern::range_embedding_grad_index(ids.data(), n, begin, end);
    QCOMPARE(index.seg_start.size(), index.seg_id.size() + 1);
    QCOMPARE(index.seg_start.front(), 0);
    QCOMPARE(static_cast<size_t>(index.seg_start.back()), index.order.size());
    size_t held = 0;
    for (const int32_t id : ids) held += in_range(id) ? 1 : 0;
    QCOMPARE(index.order.size(), held);
    Vec walked = dtable0;
    for (int64_t sgm = 0; sgm < index.segments(); ++sgm) {
      const int32_t row = index.seg_id[static_cast<size_t>(sgm)];
      QVERIFY(row >= 0 && row < rows);
      if (sgm > 0) QVERIFY(index.seg_id[static_cast<size_t>(sgm - 1)] < row);
      const int32_t first = index.seg_start[static_cast<size_t>(sgm)],
                    last = index.seg_start[static_cast<size_t>(sgm + 1)];
      QVERIFY(first < last);
      for (int32_t k = first; k < last; ++k) {
        const int32_t i = index.order[static_cast<size_t>(k)];
        QCOMPARE(ids[static_cast<size_t>(i)], begin + row);
        if (k > first) QVERIFY(index.order[static_cast<size_t>(k - 1)] < i);
      }
      for (int64_t j = 0; j < dim; ++j) {
        float acc = walked[static_cast<size_t>(row * dim + j)];
        for (int32_t k = first; k < last; ++k)
          acc += dy[static_cast<size_t>(index.order[static_cast<size_t>(k)] * dim + j)];
        walked[static_cast<size_t>(row * dim + j)] = acc;
      }
    }
    QVERIFY(same(walked, want_dtable, "dtable walked through the index"));
  }
};

QTEST_APPLESS_MAIN(tst_KernelsTp)
#include "tst_kernels_tp.moc"
