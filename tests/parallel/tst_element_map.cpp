// Element maps (engine/sharding/element_map.h): identity, a rank's shard of bucket and block
// layouts, tensor-parallel slices, composition, sorting and overlap walks. Expected values are
// written out by hand or computed element by element from the documented rules (shard_layout.h,
// tp_slicing.h) by brute-force references here, never by the code under test.
#include <QtTest>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "engine/core/error.h"
#include "engine/core/param_layout.h"
#include "engine/sharding/element_map.h"
#include "engine/sharding/shard_layout.h"
#include "engine/tensor_parallel/tp_slicing.h"

using namespace shardlab;

namespace {

// local -> global, element by element; fails the test (returns false) on a local listed twice.
bool expand(const IndexMap& m, std::map<int64_t, int64_t>& out) {
  out.clear();
  for (const IndexRun& r : m) {
    if (r.count <= 0) return false;  // runs are never empty
    for (int64_t i = 0; i < r.count; ++i)
      if (!out.emplace(r.local + i, r.global + i).second) return false;
  }
  return true;
}

std::string describe(const IndexMap& m) {
  std::string s;
  for (const IndexRun& r : m)
    s.append("{")
        .append(std::to_string(r.local))
        .append(",")
        .append(std::to_string(r.global))
        .append(",")
        .append(std::to_string(r.count))
        .append("} ");
  return s;
}

std::string describe(const std::map<int64_t, int64_t>& m) {
  std::string s;
  for (const auto& [l, g] : m) s += std::to_string(l) + "->" + std::to_string(g) + " ";
  return s;
}

#define COMPARE_MAP(actual, expected)                                                 \
  do {                                                                                \
    std::map<int64_t, int64_t> got_;                                                  \
    QVERIFY2(expand(actual, got_), ("bad runs: " + describe(actual)).c_str());        \
    QVERIFY2(got_ == (expected),                                                      \
             ("got " + describe(got_) + "\nexpected " + describe(expected)).c_str()); \
  } while (0)

#define COMPARE_RUNS(actual, expected) \
  QVERIFY2((actual) == (expected),     \
           ("got " + describe(actual) + "\nexpected " + describe(expected)).c_str())

int64_t round_up(int64_t n, int64_t m) {
  return (n + m - 1) / m * m;
}

// shard_layout.h's bucket rule, element by element: the padded space [0, round_up(total, world))
// is cut from the front into units of round_up(bucket, world); rank r owns
// [r * P / world, (r + 1) * P / world) of a unit of padded size P, its chunks back to back in unit
// order; padded position p is global element p when p < total, else padding.
std::map<int64_t, int64_t> reference_buckets(int64_t total, int world, int64_t bucket, int rank) {
  std::map<int64_t, int64_t> m;
  const int64_t padded_total = round_up(total, world);
  const int64_t unit = round_up(bucket, world);
  int64_t local = 0;
  for (int64_t begin = 0; begin < padded_total; begin += unit) {
    const int64_t p = std::min(unit, padded_total - begin);
    const int64_t chunk = p / world;
    for (int64_t j = 0; j < chunk; ++j, ++local) {
      const int64_t pos = begin + rank * chunk + j;
      if (pos < total) m[local] = pos;
    }
  }
  return m;
}

// The block rule: one unit per non-empty block, padded alone to a multiple of world.
std::map<int64_t, int64_t> reference_blocks(const std::vector<std::pair<int64_t, int64_t>>& blocks,
                                            int world, int rank) {
  std::map<int64_t, int64_t> m;
  int64_t local = 0;
  for (const auto& [begin, size] : blocks) {
    if (size == 0) continue;
    const int64_t chunk = round_up(size, world) / world;
    for (int64_t j = 0; j < chunk; ++j, ++local)
      if (rank * chunk + j < size) m[local] = begin + rank * chunk + j;
  }
  return m;
}

// A random injective map: [0, span) of the global side cut into pieces, shuffled, some dropped,
// laid out on the local side with random gaps.
IndexMap random_map(std::mt19937& rng, int64_t span) {
  std::vector<std::pair<int64_t, int64_t>> pieces;
  for (int64_t at = 0; at < span;) {
    const int64_t n = std::min<int64_t>(span - at, 1 + int64_t(rng() % 5));
    pieces.push_back({at, n});
    at += n;
  }
  std::shuffle(pieces.begin(), pieces.end(), rng);
  IndexMap m;
  int64_t local = int64_t(rng() % 3);
  for (const auto& [g, n] : pieces) {
    if (rng() % 4 == 0) continue;
    m.push_back({local, g, n});
    local += n + int64_t(rng() % 3);
  }
  return m;
}

}  // namespace

class TestElementMap : public QObject {
  Q_OBJECT
 private slots:
  void identityMap() {
    COMPARE_RUNS(identity_map(5), (IndexMap{{0, 0, 5}}));
    QVERIFY(identity_map(0).empty());
    QCOMPARE(mapped_elements(identity_map(7)), int64_t(7));
    QCOMPARE(mapped_elements({}), int64_t(0));
    QCOMPARE(mapped_elements({{0, 3, 2}, {9, 1, 4}}), int64_t(6));
  }

  void shardMapBuckets() {
    // buckets(10, 4, 4): units [0,4) [4,8) [8,10)+2 pad; each rank owns one element of each.
    const ShardLayout s = ShardLayout::buckets(10, 4, 4);
    QCOMPARE(s.shard_size(), int64_t(3));
    const std::map<int64_t, int64_t> expected[4] = {
        {{0, 0}, {1, 4}, {2, 8}},
        {{0, 1}, {1, 5}, {2, 9}},
        {{0, 2}, {1, 6}},  // local 2 is padding
        {{0, 3}, {1, 7}},  // local 2 is padding
    };
    for (int r = 0; r < 4; ++r) {
      COMPARE_MAP(shard_map(s, r), expected[r]);
      QCOMPARE(shard_map(s, r), shard_map(s, r));
      QCOMPARE(reference_buckets(10, 4, 4, r), expected[r]);  // the reference agrees by hand
    }
    QCOMPARE(mapped_elements(shard_map(s, 2)), int64_t(2));

    // A bucket size that is not a multiple of the world: buckets(10, 3, 4) -> units of 6,
    // padded total 12: [0,6) chunks of 2, [6,12) chunks of 2 with 10, 11 padding.
    const ShardLayout t = ShardLayout::buckets(10, 3, 4);
    COMPARE_MAP(shard_map(t, 0), (std::map<int64_t, int64_t>{{0, 0}, {1, 1}, {2, 6}, {3, 7}}));
    COMPARE_MAP(shard_map(t, 1), (std::map<int64_t, int64_t>{{0, 2}, {1, 3}, {2, 8}, {3, 9}}));
    COMPARE_MAP(shard_map(t, 2), (std::map<int64_t, int64_t>{{0, 4}, {1, 5}}));

    // One rank: the identity.
    COMPARE_RUNS(sorted_by_global(shard_map(ShardLayout::buckets(10, 1, 3), 0)),
                 (IndexMap{{0, 0, 10}}));

    QVERIFY_THROWS_EXCEPTION(InvalidArgument, shard_map(s, 4));
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, shard_map(s, -1));
  }

  void shardMapBlocks() {
    // block 0: a [2,3] and b [3] -> [0, 9); block 1 has no parameters; block 2: c [5] -> [9, 14);
    // block 3: d [1] -> [14, 15).
    ParamLayout layout;
    layout.add("a", {2, 3}, 0);
    layout.add("b", {3}, 0);
    layout.add("c", {5}, 2);
    layout.add("d", {1}, 3);
    QCOMPARE(layout.size(), int64_t(15));
    const ShardLayout s = ShardLayout::blocks(layout, 4);
    // Padded 12 + 8 + 4: chunks of 3, 2 and 1.
    QCOMPARE(s.shard_size(), int64_t(6));
    const std::map<int64_t, int64_t> expected[4] = {
        {{0, 0}, {1, 1}, {2, 2}, {3, 9}, {4, 10}, {5, 14}},
        {{0, 3}, {1, 4}, {2, 5}, {3, 11}, {4, 12}},
        {{0, 6}, {1, 7}, {2, 8}, {3, 13}},
        {},  // rank 3's chunks are all padding
    };
    const std::vector<std::pair<int64_t, int64_t>> blocks = {{0, 9}, {9, 0}, {9, 5}, {14, 1}};
    for (int r = 0; r < 4; ++r) {
      COMPARE_MAP(shard_map(s, r), expected[r]);
      QCOMPARE(reference_blocks(blocks, 4, r), expected[r]);
    }
    QVERIFY(shard_map(s, 3).empty());
    // Two ranks: chunks 5, 3, 1.
    const ShardLayout two = ShardLayout::blocks(layout, 2);
    COMPARE_MAP(shard_map(two, 0),
                (std::map<int64_t, int64_t>{
                    {0, 0}, {1, 1}, {2, 2}, {3, 3}, {4, 4}, {5, 9}, {6, 10}, {7, 11}, {8, 14}}));
    COMPARE_MAP(shard_map(two, 1),
                (std::map<int64_t, int64_t>{{0, 5}, {1, 6}, {2, 7}, {3, 8}, {5, 12}, {6, 13}}));
    // One rank: the identity.
    COMPARE_RUNS(sorted_by_global(shard_map(ShardLayout::blocks(layout, 1), 0)),
                 (IndexMap{{0, 0, 15}}));
  }

  void shardMapsCoverEveryElementOnce() {
    std::mt19937 rng(20261122);
    int layouts = 0;
    for (int world = 1; world <= 5; ++world)
      for (int64_t total = 0; total <= 40; ++total)
        for (int rep = 0; rep < 3; ++rep) {
          const int64_t bucket = 1 + int64_t(rng() % 12);
          const ShardLayout s = ShardLayout::buckets(total, world, bucket);
          std::vector<int> seen(size_t(total), 0);
          for (int r = 0; r < world; ++r) {
            const IndexMap m = shard_map(s, r);
            std::map<int64_t, int64_t> got;
            QVERIFY2(expand(m, got), describe(m).c_str());
            QCOMPARE(got, reference_buckets(total, world, bucket, r));
            for (const auto& [l, g] : got) {
              QVERIFY(l >= 0 && l < s.shard_size());
              QVERIFY(g >= 0 && g < total);
              ++seen[size_t(g)];
            }
          }
          for (int64_t g = 0; g < total; ++g)
            QVERIFY2(seen[size_t(g)] == 1, qPrintable(QString("buckets(%1, %2, %3): element %4 "
                                                              "held %5 times")
                                                          .arg(total)
                                                          .arg(world)
                                                          .arg(bucket)
                                                          .arg(g)
                                                          .arg(seen[size_t(g)])));
          ++layouts;

          // A random block layout of the same total: parameters of 1..7 elements in blocks
          // 0.. (some blocks skipped, i.e. empty).
          ParamLayout pl;
          std::vector<std::pair<int64_t, int64_t>> blocks;
          int block = 0;
          for (int64_t at = 0, k = 0; at < total; ++k) {
            const int64_t n = std::min<int64_t>(total - at, 1 + int64_t(rng() % 7));
            if (k > 0 && rng() % 2 == 0) block += 1 + int(rng() % 2);
            pl.add("p" + std::to_string(k), {n}, block);
            at += n;
          }
          for (int b = 0; b < pl.num_blocks(); ++b) {
            int64_t begin = -1, size = 0;
            for (const ParamInfo& p : pl.params())
              if (p.block == b) {
                if (begin < 0) begin = p.offset;
                size += p.numel;
              }
            blocks.push_back({begin, size});
          }
          const ShardLayout sb = ShardLayout::blocks(pl, world);
          std::fill(seen.begin(), seen.end(), 0);
          for (int r = 0; r < world; ++r) {
            const IndexMap m = shard_map(sb, r);
            std::map<int64_t, int64_t> got;
            QVERIFY2(expand(m, got), describe(m).c_str());
            QCOMPARE(got, reference_blocks(blocks, world, r));
            for (const auto& [l, g] : got) {
              QVERIFY(l >= 0 && l < sb.shard_size());
              QVERIFY(g >= 0 && g < total);
              ++seen[size_t(g)];
            }
          }
          for (int64_t g = 0; g < total; ++g) QCOMPARE(seen[size_t(g)], 1);
          ++layouts;
        }
    QCOMPARE(layouts, 5 * 41 * 3 * 2);
  }

  void composeWithGaps() {
    // a: x 0..4 -> y 10..14, x 5..7 -> y 30..32.
    const IndexMap a = {{0, 10, 5}, {5, 30, 3}};
    // b (y -> z), not sorted: y 31..35 -> z 500..504, y 11..12 -> z 200..201, y 14 -> z 300.
    const IndexMap b = {{31, 500, 5}, {11, 200, 2}, {14, 300, 1}};
    // y 10, 13 and 30 are not in b: x 0, 3 and 5 map to nothing.
    COMPARE_MAP(compose(a, b),
                (std::map<int64_t, int64_t>{{1, 200}, {2, 201}, {4, 300}, {6, 500}, {7, 501}}));
    QVERIFY(compose(a, {}).empty());
    QVERIFY(compose({}, b).empty());
    QVERIFY(compose(a, {{0, 0, 10}, {15, 15, 15}, {33, 33, 5}}).empty());  // b misses every y
    // Composing with the identity keeps a.
    COMPARE_MAP(compose(a, identity_map(40)),
                (std::map<int64_t, int64_t>{
                    {0, 10}, {1, 11}, {2, 12}, {3, 13}, {4, 14}, {5, 30}, {6, 31}, {7, 32}}));
  }

  void composeRandomAgainstBruteForce() {
    std::mt19937 rng(7);
    for (int trial = 0; trial < 300; ++trial) {
      const IndexMap a = random_map(rng, 1 + int64_t(rng() % 30));
      const IndexMap b = random_map(rng, 1 + int64_t(rng() % 30));
      // b: y -> z is random_map's local -> global; reinterpret so that b's local side (y) is
      // a's global side.
      std::map<int64_t, int64_t> ea, eb, expected;
      QVERIFY(expand(a, ea));
      QVERIFY(expand(b, eb));
      for (const auto& [x, y] : ea) {
        const auto it = eb.find(y);
        if (it != eb.end()) expected[x] = it->second;
      }
      COMPARE_MAP(compose(a, b), expected);
    }
  }

  void sortedByGlobalMerges() {
    // Sorted: {0,10,5} {5,15,2} continue each other on both sides -> {0,10,7}; {7,20,1} {8,21,2}
    // likewise -> {7,20,3}; 10+7 = 17 != 20, so the two results stay apart.
    COMPARE_RUNS(sorted_by_global({{5, 15, 2}, {0, 10, 5}, {8, 21, 2}, {7, 20, 1}}),
                 (IndexMap{{0, 10, 7}, {7, 20, 3}}));
    // Global continues but local does not: no merge (and the reverse).
    COMPARE_RUNS(sorted_by_global({{5, 2, 2}, {0, 0, 2}}), (IndexMap{{0, 0, 2}, {5, 2, 2}}));
    COMPARE_RUNS(sorted_by_global({{2, 9, 3}, {0, 0, 2}}), (IndexMap{{0, 0, 2}, {2, 9, 3}}));
    // Local descending while global ascends.
    COMPARE_RUNS(sorted_by_global({{0, 20, 1}, {1, 10, 1}, {2, 0, 1}}),
                 (IndexMap{{2, 0, 1}, {1, 10, 1}, {0, 20, 1}}));
    QVERIFY(sorted_by_global({}).empty());
    // Empty runs are dropped.
    COMPARE_RUNS(sorted_by_global({{3, 3, 0}, {0, 0, 3}}), (IndexMap{{0, 0, 3}}));

    std::mt19937 rng(11);
    for (int trial = 0; trial < 200; ++trial) {
      const IndexMap m = random_map(rng, 1 + int64_t(rng() % 40));
      const IndexMap s = sorted_by_global(m);
      std::map<int64_t, int64_t> em;
      QVERIFY(expand(m, em));
      COMPARE_MAP(s, em);  // the same elements
      for (size_t i = 1; i < s.size(); ++i) {
        QVERIFY(s[i - 1].global + s[i - 1].count <= s[i].global);  // sorted, disjoint
        QVERIFY(!(s[i - 1].global + s[i - 1].count == s[i].global &&
                  s[i - 1].local + s[i - 1].count == s[i].local));  // fully merged
      }
    }
  }

  void forEachOverlapCounts() {
    // Globals 10..14 (local 0..), 20..24 (local 20..), 30..31 (local 100..).
    const IndexMap m = {{0, 10, 5}, {20, 20, 5}, {100, 30, 2}};
    std::vector<IndexRun> pieces;
    const auto collect = [&](int64_t g, int64_t n) {
      pieces.clear();
      return for_each_overlap(m, g, n, [&](int64_t local, int64_t global, int64_t count) {
        pieces.push_back({local, global, count});
      });
    };
    QCOMPARE(collect(12, 15), int64_t(8));  // [12, 27): 12..14 and 20..24
    COMPARE_RUNS(pieces, (IndexMap{{2, 12, 3}, {20, 20, 5}}));
    QCOMPARE(collect(14, 17), int64_t(7));  // [14, 31)
    COMPARE_RUNS(pieces, (IndexMap{{4, 14, 1}, {20, 20, 5}, {100, 30, 1}}));
    QCOMPARE(collect(0, 10), int64_t(0));
    QVERIFY(pieces.empty());
    QCOMPARE(collect(15, 5), int64_t(0));  // the gap [15, 20)
    QVERIFY(pieces.empty());
    QCOMPARE(collect(32, 100), int64_t(0));
    QVERIFY(pieces.empty());
    QCOMPARE(collect(11, 0), int64_t(0));
    QVERIFY(pieces.empty());
    QCOMPARE(collect(0, 100), int64_t(12));
    COMPARE_RUNS(pieces, m);
    QCOMPARE(collect(22, 1), int64_t(1));
    COMPARE_RUNS(pieces, (IndexMap{{22, 22, 1}}));
    QCOMPARE(for_each_overlap({}, 0, 10, [](int64_t, int64_t, int64_t) {}), int64_t(0));

    // Random maps and queries against counting element by element.
    std::mt19937 rng(3);
    for (int trial = 0; trial < 300; ++trial) {
      const IndexMap s = sorted_by_global(random_map(rng, 1 + int64_t(rng() % 40)));
      std::map<int64_t, int64_t> global_to_local;
      for (const IndexRun& r : s)
        for (int64_t i = 0; i < r.count; ++i) global_to_local[r.global + i] = r.local + i;
      const int64_t g = int64_t(rng() % 45), n = int64_t(rng() % 20);
      std::map<int64_t, int64_t> expected;
      for (int64_t x = g; x < g + n; ++x)
        if (global_to_local.count(x)) expected[x] = global_to_local[x];
      std::map<int64_t, int64_t> got;
      bool ok = true;
      const int64_t covered = for_each_overlap(s, g, n, [&](int64_t l, int64_t gg, int64_t c) {
        if (c <= 0) ok = false;
        for (int64_t i = 0; i < c; ++i)
          if (!got.emplace(gg + i, l + i).second) ok = false;
      });
      QVERIFY(ok);
      QCOMPARE(covered, int64_t(expected.size()));
      QVERIFY2(got == expected, ("global->local got " + describe(got) + "\nexpected " +
                                 describe(expected) + "\nmap " + describe(s))
                                    .c_str());
    }
  }

  void tpMapRowsAndColumns() {
    // The full model: emb [2,2] @0 (replicated), fc [4,6] @4, proj [3,4] @28, qkv [6,2] @40,
    // bias [4] @52 (a [4,1] matrix).
    ParamLayout global;
    global.add("emb", {2, 2}, 0);
    global.add("fc", {4, 6}, 0);
    global.add("proj", {3, 4}, 0);
    global.add("qkv", {6, 2}, 0);
    global.add("bias", {4}, 0);
    QCOMPARE(global.size(), int64_t(56));
    // tp rank 1 of 2: emb whole, fc rows 2..3, proj columns 2..3, qkv rows 1, 3, 5, bias rows 2..3.
    ParamLayout local;
    local.add("emb", {2, 2}, 0);   // @0
    local.add("fc", {2, 6}, 0);    // @4
    local.add("proj", {3, 2}, 0);  // @16
    local.add("qkv", {3, 2}, 0);   // @22
    local.add("bias", {2}, 0);     // @28
    QCOMPARE(local.size(), int64_t(30));
    std::vector<ParamSlice> slices(5);
    slices[0] = {0, 0, {{0, 2, 0, 2}}, true};
    slices[1] = {1, 1, {{2, 2, 0, 6}}, false};
    slices[2] = {2, 2, {{0, 3, 2, 2}}, false};
    slices[3] = {3, 3, {{1, 1, 0, 2}, {3, 1, 0, 2}, {5, 1, 0, 2}}, false};
    slices[4] = {4, 4, {{2, 2, 0, 1}}, false};

    // By hand: emb 0..3 -> 0..3; fc rows 2, 3 (6 columns) -> 4 + 12.. 4 + 23 = 16..27;
    // proj row i columns 2, 3 -> 28 + 4i + 2, + 3; qkv rows 1, 3, 5 -> 40 + 2, 46, 50 (+0, +1);
    // bias rows 2, 3 -> 54, 55.
    std::map<int64_t, int64_t> expected = {{0, 0}, {1, 1}, {2, 2}, {3, 3}};
    for (int64_t i = 0; i < 12; ++i) expected[4 + i] = 16 + i;
    expected[16] = 30;
    expected[17] = 31;
    expected[18] = 34;
    expected[19] = 35;
    expected[20] = 38;
    expected[21] = 39;
    expected[22] = 42;
    expected[23] = 43;
    expected[24] = 46;
    expected[25] = 47;
    expected[26] = 50;
    expected[27] = 51;
    expected[28] = 54;
    expected[29] = 55;
    const IndexMap m = tp_map(slices, local, global);
    COMPARE_MAP(m, expected);
    // One run per rectangle row, merged where contiguous on both sides.
    COMPARE_RUNS(m, (IndexMap{{0, 0, 4},
                              {4, 16, 12},
                              {16, 30, 2},
                              {18, 34, 2},
                              {20, 38, 2},
                              {22, 42, 2},
                              {24, 46, 2},
                              {26, 50, 2},
                              {28, 54, 2}}));
    QCOMPARE(mapped_elements(m), int64_t(30));

    // Without the replicated emb.
    for (int64_t i = 0; i < 4; ++i) expected.erase(i);
    const IndexMap skipped = tp_map(slices, local, global, /*skip_replicated=*/true);
    COMPARE_MAP(skipped, expected);
    QCOMPARE(mapped_elements(skipped), int64_t(26));

    // Composition with a shard of the global model: rank 0 of buckets(56, 2, 56) holds globals
    // 0..27, so only emb and fc survive, each local l -> the global's shard offset.
    const IndexMap to_shard =
        compose(m, sorted_by_global([&] {
                  IndexMap inv;  // global -> shard local
                  for (const IndexRun& r : shard_map(ShardLayout::buckets(56, 2, 56), 0))
                    inv.push_back({r.global, r.local, r.count});
                  return inv;
                }()));
    std::map<int64_t, int64_t> expected_shard = {{0, 0}, {1, 1}, {2, 2}, {3, 3}};
    for (int64_t i = 0; i < 12; ++i) expected_shard[4 + i] = 16 + i;
    COMPARE_MAP(to_shard, expected_shard);
  }
};

QTEST_GUILESS_MAIN(TestElementMap)
#include "tst_element_map.moc"
