// Sampler: per-epoch permutations from the seed, drop-last, data-parallel rank slices and exact
// resumption from a saved state.
#include <QtTest>

#include <algorithm>
#include <numeric>
#include <set>

#include "engine/core/error.h"
#include "engine/core/rng.h"
#include "engine/data/sampler.h"
#include "tests/data/data_test_util.h"

using namespace shardlab;
using namespace shardlab::testing;

namespace {

// All indices the sampler hands out in n calls, concatenated.
std::vector<int64_t> take(Sampler& s, int64_t n) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < n; ++i) {
    const auto b = s.next();
    out.insert(out.end(), b.begin(), b.end());
  }
  return out;
}

}  // namespace

class TestSampler : public QObject {
  Q_OBJECT
 private slots:
  void eachEpochIsAPermutation() {
    Sampler s(100, {.batch_size = 10, .seed = 7});
    QCOMPARE(s.batches_per_epoch(), 10);
    std::vector<std::vector<int64_t>> epochs;
    for (int e = 0; e < 3; ++e) {
      auto order = take(s, 10);
      QCOMPARE(s.epoch(), e);
      std::vector<int64_t> sorted = order;
      std::sort(sorted.begin(), sorted.end());
      std::vector<int64_t> all(100);
      std::iota(all.begin(), all.end(), 0);
      QCOMPARE(sorted, all);
      QVERIFY(order != all);  // actually shuffled
      epochs.push_back(order);
    }
    QVERIFY(epochs[0] != epochs[1]);
    QVERIFY(epochs[1] != epochs[2]);

    // Epoch e's order is the documented Rng::derive(seed, e) shuffle.
    std::vector<int64_t> expect(100);
    std::iota(expect.begin(), expect.end(), 0);
    Rng rng = Rng::derive(7, 2);
    rng.shuffle(expect);
    QCOMPARE(epochs[2], expect);
  }

  void dropLast() {
    Sampler s(103, {.batch_size = 10, .seed = 1});
    QCOMPARE(s.batches_per_epoch(), 10);
    const auto order = take(s, 10);
    QCOMPARE(std::set<int64_t>(order.begin(), order.end()).size(), size_t(100));
    for (int64_t i : order) QVERIFY(i >= 0 && i < 103);
    QCOMPARE(s.epoch(), 0);
    s.next();
    QCOMPARE(s.epoch(), 1);  // the 3 left over were dropped, not carried into a short batch
  }

  void seedsDetermineOrder() {
    Sampler a(50, {.batch_size = 5, .seed = 3}), b(50, {.batch_size = 5, .seed = 3}),
        c(50, {.batch_size = 5, .seed = 4});
    const auto ta = take(a, 25), tb = take(b, 25), tc = take(c, 25);
    QCOMPARE(ta, tb);
    QVERIFY(ta != tc);
  }

  void noShuffleIsSequential() {
    Sampler s(12, {.batch_size = 4, .seed = 9, .shuffle = false});
    QCOMPARE(s.next(), (std::vector<int64_t>{0, 1, 2, 3}));
    take(s, 2);
    QCOMPARE(s.next(), (std::vector<int64_t>{0, 1, 2, 3}));
    QCOMPARE(s.epoch(), 1);
  }

  void rankSlicesUnionToGlobalBatch() {
    const int64_t n = 70, batch = 8, steps = 20;  // 8 batches per epoch: crosses two epochs
    Sampler single(n, {.batch_size = batch, .seed = 11});
    std::vector<std::vector<int64_t>> global;
    for (int i = 0; i < steps; ++i) global.push_back(single.next());

    for (int64_t world : {1, 2, 4}) {
      std::vector<Sampler> ranks;
      for (int64_t r = 0; r < world; ++r) {
        ranks.emplace_back(
            n, SamplerOptions{.batch_size = batch, .seed = 11, .rank = r, .world = world});
        QCOMPARE(ranks.back().local_batch_size(), batch / world);
      }
      for (int i = 0; i < steps; ++i) {
        std::vector<int64_t> joined;
        for (auto& s : ranks) {
          const auto part = s.next();
          QCOMPARE(static_cast<int64_t>(part.size()), batch / world);
          joined.insert(joined.end(), part.begin(), part.end());
        }
        QVERIFY2(joined == global[static_cast<size_t>(i)],
                 qPrintable(QString("world %1, step %2").arg(world).arg(i)));
      }
    }
  }

  void stateResumesExactly() {
    const SamplerOptions opt{.batch_size = 6, .seed = 5, .rank = 1, .world = 2};
    for (int64_t stop : {0, 3, 7, 14, 16}) {  // 7 batches per epoch: 7 and 14 are epoch ends
      Sampler a(45, opt);
      take(a, stop);
      const SamplerState st = a.state();
      const auto expect = take(a, 20);

      Sampler b(45, opt);
      b.set_state(st);
      QCOMPARE(b.state(), st);
      QCOMPARE(b.epoch(), st.epoch);
      QVERIFY2(take(b, 20) == expect, qPrintable(QString("stopped after %1").arg(stop)));
      QCOMPARE(b.state(), a.state());
    }
    Sampler s(45, opt);
    take(s, 7);
    QCOMPARE(s.state(), (SamplerState{0, 7}));
    s.next();
    QCOMPARE(s.state(), (SamplerState{1, 1}));
  }

  void invalidOptions() {
    expect_error<InvalidArgument>([] { Sampler(100, {.batch_size = 6, .world = 4}); },
                                  {"batch_size", "not divisible", "4"});
    expect_error<InvalidArgument>([] { Sampler(100, {.batch_size = 8, .rank = 2, .world = 2}); },
                                  {"rank"});
    expect_error<InvalidArgument>([] { Sampler(100, {.batch_size = 0}); }, {"batch_size"});
    expect_error<InvalidArgument>([] { Sampler(5, {.batch_size = 8}); }, {"larger than"});
    Sampler s(100, {.batch_size = 10});
    expect_error<InvalidArgument>([&] { s.set_state({0, 11}); }, {"index 11"});
    expect_error<InvalidArgument>([&] { s.set_state({-1, 0}); }, {"epoch"});
  }
};

QTEST_APPLESS_MAIN(TestSampler)
#include "tst_sampler.moc"
