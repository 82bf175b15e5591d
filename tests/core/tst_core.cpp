// Core building blocks: Tensor shapes, the flat parameter layout, the deterministic RNG and the
// error macros.
#include <QtTest>

#include <cmath>
#include <set>

#include "engine/core/display_text.h"
#include "engine/core/error.h"
#include "engine/core/human_format.h"
#include "engine/core/param_layout.h"
#include "engine/core/rng.h"
#include "engine/device/tensor.h"

using namespace shardlab;

class TestCore : public QObject {
  Q_OBJECT
 private slots:
  void tensorShapeAndReshape() {
    Tensor t({2, 3, 4});
    QCOMPARE(t.numel(), 24);
    QCOMPARE(t.dim(-1), 4);
    QCOMPARE(t.dim(0), 2);
    for (float v : t.span()) QCOMPARE(v, 0.0f);
    t[5] = 7.0f;
    t.reshape({6, 4});
    QCOMPARE(t[5], 7.0f);
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, t.reshape({5, 5}));
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, t.dim(3));
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, Tensor({2, 2}, {1.0f, 2.0f, 3.0f}));
  }

  void layoutIsContiguousByBlock() {
    ParamLayout layout;
    QCOMPARE(layout.add("a.w", {3, 4}, 0), 0);
    QCOMPARE(layout.add("a.b", {4}, 0), 1);
    QCOMPARE(layout.add("c.w", {2, 2}, 2), 2);
    QCOMPARE(layout.size(), 12 + 4 + 4);
    QCOMPARE(layout[1].offset, 12);
    QCOMPARE(layout[2].offset, 16);
    QCOMPARE(layout.num_blocks(), 3);
    QCOMPARE(layout.block_range(0).begin, 0);
    QCOMPARE(layout.block_range(0).end, 16);
    // Block 1 has no parameters: an empty range where block 2 starts.
    QCOMPARE(layout.block_range(1).begin, 16);
    QCOMPARE(layout.block_range(1).size(), 0);
    QCOMPARE(layout.index_of("c.w"), 2);
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, layout.index_of("nope"));
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, layout.add("a.w", {1}, 2));  // duplicate name
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, layout.add("z", {1}, 1));    // block out of order

    std::vector<float> p(20), g(20);
    ParamBinding whole{&layout, nullptr, DevicePtr<float>(p.data()), DevicePtr<float>(g.data()), 0};
    QVERIFY(whole.param(2).raw() == p.data() + 16);
    // Only block 2 materialised (as FSDP does): pointers are relative to its first element.
    std::vector<float> p2(4), g2(4);
    ParamBinding part{&layout, nullptr, DevicePtr<float>(p2.data()), DevicePtr<float>(g2.data()),
                      16};
    QVERIFY(part.param(2).raw() == p2.data());
    QVERIFY(part.grad(2).raw() == g2.data());
  }

  void rngIsDeterministicAndWellDistributed() {
    Rng a(42), b(42), c(43);
    for (int i = 0; i < 100; ++i) QCOMPARE(a.next_u64(), b.next_u64());
    QVERIFY(a.next_u64() != c.next_u64());

    Rng r(7);
    const int n = 200000;
    double sum = 0, sq = 0;
    for (int i = 0; i < n; ++i) {
      const double x = r.normal();
      sum += x;
      sq += x * x;
    }
    const double mean = sum / n, var = sq / n - mean * mean;
    QVERIFY2(std::abs(mean) < 0.01, qPrintable(QString::number(mean)));
    QVERIFY2(std::abs(var - 1.0) < 0.02, qPrintable(QString::number(var)));

    double usum = 0;
    for (int i = 0; i < n; ++i) {
      const float u = r.uniform();
      QVERIFY(u >= 0.0f && u < 1.0f);
      usum += u;
    }
    QVERIFY(std::abs(usum / n - 0.5) < 0.005);

    std::vector<int> v(50);
    for (int i = 0; i < 50; ++i) v[i] = i;
    r.shuffle(v);
    QCOMPARE(std::set<int>(v.begin(), v.end()).size(), size_t(50));
    bool moved = false;
    for (int i = 0; i < 50; ++i) moved |= v[i] != i;
    QVERIFY(moved);
  }

  void rngStateRoundTrip() {
    Rng a(3);
    a.normal();  // leaves a spare value pending
    Rng b(0);
    b.set_state(a.state());
    for (int i = 0; i < 10; ++i) QCOMPARE(a.normal(), b.normal());
    QVERIFY_THROWS_EXCEPTION(FormatError, b.set_state(std::vector<uint64_t>{1, 2}));
    // Derived streams differ from each other and from the parent seed.
    QVERIFY(Rng::derive(5, 0).next_u64() != Rng::derive(5, 1).next_u64());
  }

  // Byte counts and rank lists (engine/core/human_format.h), in each style a caller uses; the
  // expected strings are written out by hand.
  void humanFormat() {
    using shardlab::human_bytes;
    QCOMPARE(human_bytes(0), std::string("0 B"));
    QCOMPARE(human_bytes(1023), std::string("1023 B"));
    QCOMPARE(human_bytes(1024), std::string("1.0 KiB"));
    QCOMPARE(human_bytes(1536), std::string("1.5 KiB"));
    QCOMPARE(human_bytes(5 * 1024 * 1024 + 512 * 1024), std::string("5.5 MiB"));
    QCOMPARE(human_bytes(int64_t{3} << 30), std::string("3.0 GiB"));
    QCOMPARE(human_bytes(int64_t{3} << 30, {.gib_decimals = 2}), std::string("3.00 GiB"));
    QCOMPARE(human_bytes(15 * 1024, {.step_up = 10}), std::string("15.0 KiB"));
    QCOMPARE(human_bytes(9 * 1024, {.step_up = 10}), std::string("9216 B"));
    QCOMPARE(human_bytes(9 * 1024 * 1024, {.step_up = 10}), std::string("9216.0 KiB"));
    QCOMPARE(human_bytes(65536, {.whole = true}), std::string("64 KiB"));
    QCOMPARE(human_bytes(3 * 1024 * 1024 + 1, {.whole = true}), std::string("3 MiB"));
    QCOMPARE(human_bytes(1536, {.decimals = 2}), std::string("1.50 KiB"));

    using shardlab::rank_list;
    QCOMPARE(rank_list({3}), std::string("3"));
    QCOMPARE(rank_list({1, 2, 5}), std::string("1, 2, 5"));
    QCOMPARE(rank_list({1, 2, 5}, {.last = " and "}), std::string("1, 2 and 5"));
    QCOMPARE(rank_list({1, 2}, {.last = " and "}), std::string("1 and 2"));
    QCOMPARE(rank_list({3}, {.label = true}), std::string("rank 3"));
    QCOMPARE(rank_list({2, 3}, {.label = true}), std::string("ranks 2, 3"));
  }

  // Text from the wire (engine/core/display_text.h): controls and DEL as '?', the length capped
  // at a character, so a cut never leaves half a UTF-8 sequence (which a terminal, the app and the
  // page would each show differently, and a WebSocket frame could not carry).
  void printableFromTheWire() {
    QCOMPARE(shardlab::printable(std::string("h\x1b[2J\n\x7f", 7)), std::string("h?[2J??"));
    QCOMPARE(shardlab::printable(std::string(kMaxTextBytes, 'r')), std::string(kMaxTextBytes, 'r'));
    QCOMPARE(shardlab::printable("abcdef", 4), std::string("abcd..."));
    // "ab\u00fc" is 4 bytes: a cap of 3 would split the \u00fc; the cut goes back before it.
    QCOMPARE(shardlab::printable("ab\u00fcd", 3), std::string("ab..."));
    QCOMPARE(shardlab::printable("\u2713\u2713", 4), std::string("\u2713..."));
    QCOMPARE(shardlab::printable("gr\u00fc\u00dfe", 64), std::string("gr\u00fc\u00dfe"));
  }

  void enforceCarriesWhereAndMessage() {
    try {
      SL_ENFORCE(1 + 1 == 3, "arithmetic broke: {}", 42);
      QFAIL("no throw");
    } catch (const InvalidArgument& e) {
      QCOMPARE(QString(e.what()), QString("arithmetic broke: 42"));
      QVERIFY(QString::fromStdString(e.where()).startsWith("tests/core/tst_core.cpp:"));
      QVERIFY(QString::fromStdString(e.where()).contains("[1 + 1 == 3]"));
    }
    QVERIFY_THROWS_EXCEPTION(IoError, SL_THROW(IoError, "cannot open {}", "x"));
  }
};

QTEST_APPLESS_MAIN(TestCore)
#include "tst_core.moc"
