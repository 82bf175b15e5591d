// The CPU bf16 path: float <-> bf16 conversion against hand-computed bit patterns (ties to even,
// NaN, infinities, subnormals, overflow) and an independent nearest-value search; the bf16-master
// updates against the fp32 update followed by the cast; scale_cast and sq_norm references.
#include <QtTest>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "engine/doctor/update_cases.h"
#include "kernels/cpu/bf16.h"
#include "kernels/cpu/scale_cast.h"
#include "kernels/cpu/sq_norm.h"

using namespace shardlab::kernels;
namespace updates = shardlab::doctor::updates;

namespace {

// QCOMPARE on float/double is a fuzzy comparison in Qt Test; these checks mean the exact bits.
template <class T>
bool exactly(T got, T want) {
  return std::memcmp(&got, &want, sizeof(T)) == 0;
}

float from_bits(uint32_t u) {
  return std::bit_cast<float>(u);
}

// Nearest bf16 by exact distance in double, ties to the even pattern: independent of the bit trick.
uint16_t nearest_bf16(float f) {
  const auto u = std::bit_cast<uint32_t>(f);
  const auto lo = static_cast<uint16_t>(u >> 16);  // truncation: toward zero in magnitude
  const auto hi = static_cast<uint16_t>(lo + 1);   // next magnitude up (0x7f80 = inf at the top)
  const double x = std::fabs(static_cast<double>(f));
  const double dlo = x - std::fabs(static_cast<double>(bf16_to_float(lo)));
  // Above the largest bf16 the next pattern is infinity: RNE treats it as 2^128 for rounding.
  const double hi_mag = (hi & 0x7fff) == 0x7f80 ? std::ldexp(1.0, 128)
                                                : std::fabs(static_cast<double>(bf16_to_float(hi)));
  const double dhi = hi_mag - x;
  if (dlo < dhi) return lo;
  if (dhi < dlo) return hi;
  return (lo & 1) ? hi : lo;
}

}  // namespace

class tst_KernelsBf16 : public QObject {
  Q_OBJECT

 private slots:
  void to_bf16_data() {
    QTest::addColumn<uint32_t>("in");
    QTest::addColumn<int>("out");
    QTest::newRow("one") << 0x3f800000u << 0x3f80;
    QTest::newRow("minus one") << 0xbf800000u << 0xbf80;
    QTest::newRow("zero") << 0x00000000u << 0x0000;
    QTest::newRow("minus zero") << 0x80000000u << 0x8000;
    QTest::newRow("pi") << 0x40490fdbu
                        << 0x4049;  // 3.14159274 -> 3.140625 (low half 0x0fdb < half)
    QTest::newRow("below half") << 0x3f807fffu << 0x3f80;
    QTest::newRow("above half") << 0x3f808001u << 0x3f81;
    QTest::newRow("tie to even (down)") << 0x3f808000u << 0x3f80;
    QTest::newRow("tie to even (up)") << 0x3f818000u << 0x3f82;
    QTest::newRow("negative tie to even (up)") << 0xbf818000u << 0xbf82;
    QTest::newRow("carry into exponent") << 0x3fffc000u << 0x4000;  // 1.99...: rounds up to 2
    QTest::newRow("inf") << 0x7f800000u << 0x7f80;
    QTest::newRow("minus inf") << 0xff800000u << 0xff80;
    QTest::newRow("largest float overflows to inf") << 0x7f7fffffu << 0x7f80;
    QTest::newRow("largest bf16 stays") << 0x7f7f7fffu << 0x7f7f;
    QTest::newRow("quiet NaN") << 0x7fc00000u << 0x7fc0;
    QTest::newRow("signalling NaN is quieted") << 0x7f800001u << 0x7fc0;
    QTest::newRow("minus NaN with payload") << 0xffa12345u << 0xffe1;
    QTest::newRow("NaN whose low half would carry") << 0x7fffffffu << 0x7fff;
    QTest::newRow("smallest subnormal rounds to zero") << 0x00000001u << 0x0000;
    QTest::newRow("subnormal tie to even (down)") << 0x00008000u << 0x0000;
    QTest::newRow("subnormal tie to even (up)") << 0x00018000u << 0x0002;
    QTest::newRow("subnormal above half") << 0x00008001u << 0x0001;
    QTest::newRow("largest subnormal rounds to smallest normal") << 0x007fffffu << 0x0080;
    QTest::newRow("negative subnormal") << 0x80028001u << 0x8003;
  }

  void to_bf16() {
    QFETCH(uint32_t, in);
    QFETCH(int, out);
    const uint16_t got = float_to_bf16(from_bits(in));
    QCOMPARE(QString::number(got, 16), QString::number(out, 16));
    if (std::isnan(from_bits(in))) QVERIFY(std::isnan(bf16_to_float(got)));
  }

  void from_bf16_is_exact() {
    QVERIFY(exactly(bf16_to_float(0x3f80), 1.0f));
    QVERIFY(exactly(bf16_to_float(0x4049), 3.140625f));
    QVERIFY(exactly(bf16_to_float(0xc000), -2.0f));
    QVERIFY(exactly(bf16_to_float(0x0001), std::ldexp(1.0f, -133)));  // smallest bf16 subnormal
    QVERIFY(exactly(bf16_to_float(0x7f80), std::numeric_limits<float>::infinity()));
    QVERIFY(std::isnan(bf16_to_float(0x7fc0)));
  }

  // Every bf16 pattern survives bf16 -> float -> bf16 (NaNs stay NaN, quieted).
  void every_bf16_round_trips() {
    for (uint32_t b = 0; b <= 0xffff; ++b) {
      const float f = bf16_to_float(static_cast<uint16_t>(b));
      const uint16_t back = float_to_bf16(f);
      if (std::isnan(f))
        QVERIFY(std::isnan(bf16_to_float(back)));
      else
        QCOMPARE(back, static_cast<uint16_t>(b));
    }
  }

  // Random bit patterns (all exponents, ties included by construction) against the distance search.
  void matches_nearest_search() {
    std::mt19937 rng(12345);
    for (int i = 0; i < 1'000'000; ++i) {
      uint32_t u = rng();
      if (i % 4 == 1) u = (u & 0xffff0000u) | 0x8000u;  // exact ties
      const float f = from_bits(u);
      if (std::isnan(f)) continue;
      const uint16_t got = float_to_bf16(f);
      const uint16_t want = nearest_bf16(f);
      if (got != want)
        QFAIL(qPrintable(QStringLiteral("0x%1 -> 0x%2, nearest is 0x%3")
                             .arg(u, 8, 16, QLatin1Char('0'))
                             .arg(got, 4, 16, QLatin1Char('0'))
                             .arg(want, 4, 16, QLatin1Char('0'))));
    }
  }

  // The bf16-master update equals the fp32 update followed by the RNE cast, bit for bit, and
  // leaves the fp32 results (master and state) exactly as without the copy. Sizes cross the
  // kernels' 4096-element pieces.
  void bf16_master_update_data() {
    QTest::addColumn<int>("op");
    QTest::addColumn<qint64>("n");
    for (const auto op : updates::all_ops())
      for (const qint64 n : {1, 1000, 4096, 4097, 3 * 4096 + 5})
        QTest::addRow("%s n=%lld", updates::op_name(op).c_str(), static_cast<long long>(n))
            << static_cast<int>(op) << n;
  }

  void bf16_master_update() {
    QFETCH(int, op);
    QFETCH(qint64, n);
    const auto o = static_cast<updates::Op>(op);
    constexpr uint32_t kSeed = 77;
    auto fp32 = updates::make_state(o, n, kSeed);
    auto mixed = updates::make_state(o, n, kSeed);
    updates::cpu_steps(o, fp32, kSeed, 3, false);
    updates::cpu_steps(o, mixed, kSeed, 3, true);
    QCOMPARE(mixed.param, fp32.param);
    QCOMPARE(mixed.s1, fp32.s1);
    QCOMPARE(mixed.s2, fp32.s2);
    for (qint64 i = 0; i < n; ++i) QCOMPARE(mixed.bf16[i], float_to_bf16(fp32.param[i]));
    // The copy is the rounded master: within half a bf16 ulp (at most 2^-8 relative).
    for (qint64 i = 0; i < n; ++i)
      QVERIFY(std::fabs(bf16_to_float(mixed.bf16[i]) - fp32.param[i]) <=
              std::ldexp(std::fabs(fp32.param[i]), -8));
  }

  void scale_cast_reference() {
    const std::vector<float> in{
        1.0f, from_bits(0x3f808000u), -3.0f, 0.0f, 1e-40f, std::numeric_limits<float>::infinity()};
    std::vector<uint16_t> bf(in.size());
    scale_cast_to_bf16(in.data(), bf.data(), static_cast<int64_t>(in.size()), 0.5f);
    const std::vector<uint16_t> want{0x3f00, 0x3f00, 0xbfc0, 0x0000, float_to_bf16(0.5f * 1e-40f),
                                     0x7f80};
    QCOMPARE(bf, want);
    std::vector<float> back(in.size());
    scale_cast_from_bf16(bf.data(), back.data(), static_cast<int64_t>(bf.size()), 4.0f);
    QVERIFY(exactly(back[0], 2.0f));
    QVERIFY(exactly(back[2], -6.0f));
    QVERIFY(exactly(back[5], std::numeric_limits<float>::infinity()));
  }

  void sq_norm_reference() {
    QVERIFY(exactly(sq_norm(nullptr, 0), 0.0));
    std::vector<float> x(1000);
    for (int i = 0; i < 1000; ++i) x[i] = static_cast<float>(i + 1);
    QVERIFY(exactly(sq_norm(x.data(), 1000), 1000.0 * 1001.0 * 2001.0 / 6.0));  // exact in double
  }
};

QTEST_APPLESS_MAIN(tst_KernelsBf16)
#include "tst_kernels_bf16.moc"
