// Topology: rank <-> (pp, tp, dp) against an independent enumeration in Megatron's order (tp
// fastest, then dp, then pp), the groups of each dimension, dp = -1, every invalid layout and
// model, and build_groups on the threads backend (group sizes, ranks and an all-reduce per group).
#include <QtTest>

#include <algorithm>
#include <array>
#include <map>
#include <set>

#include "engine/comm/threads/world.h"
#include "engine/topology/topology.h"
#include "tests/common/caught.h"

using namespace shardlab;

using shardlab::test::caught;

namespace {

QString qs(const std::string& s) {
  return QString::fromStdString(s);
}

// The rank table built by hand: entry r is rank r's coordinates, enumerated tp fastest, then dp,
// then pp.
std::vector<Coord> enumerate(int pp, int tp, int dp) {
  std::vector<Coord> table;
  for (int p = 0; p < pp; ++p)
    for (int d = 0; d < dp; ++d)
      for (int t = 0; t < tp; ++t) table.push_back(Coord{p, t, d});
  return table;
}

// Every (pp, tp, dp) with pp * tp * dp <= 16.
void add_layouts() {
  QTest::addColumn<int>("pp");
  QTest::addColumn<int>("tp");
  QTest::addColumn<int>("dp");
  for (int pp = 1; pp <= 16; ++pp)
    for (int tp = 1; pp * tp <= 16; ++tp)
      for (int dp = 1; pp * tp * dp <= 16; ++dp)
        QTest::addRow("%dx%dx%d", pp, tp, dp) << pp << tp << dp;
}

// Along `dim`, the coordinate; across the other two, the identity of the group.
int along(const Coord& c, ParallelDim dim) {
  return dim == ParallelDim::Tp ? c.tp : dim == ParallelDim::Pp ? c.pp : c.dp;
}
bool same_group(const Coord& a, const Coord& b, ParallelDim dim) {
  switch (dim) {
    case ParallelDim::Tp:
      return a.pp == b.pp && a.dp == b.dp;
    case ParallelDim::Pp:
      return a.tp == b.tp && a.dp == b.dp;
    case ParallelDim::Dp:
      return a.pp == b.pp && a.tp == b.tp;
  }
  return false;
}

// The members of rank r's group along dim, from the table alone, ordered by the coordinate.
std::vector<int> expected_group(const std::vector<Coord>& table, int r, ParallelDim dim) {
  std::vector<int> members;
  for (int s = 0; s < int(table.size()); ++s)
    if (same_group(table[size_t(r)], table[size_t(s)], dim)) members.push_back(s);
  std::sort(members.begin(), members.end(), [&](int a, int b) {
    return along(table[size_t(a)], dim) < along(table[size_t(b)], dim);
  });
  return members;
}

QString show(const std::vector<int>& v) {
  QStringList parts;
  for (int x : v) parts << QString::number(x);
  return "{" + parts.join(",") + "}";
}

const ParallelDim kDims[] = {ParallelDim::Tp, ParallelDim::Pp, ParallelDim::Dp};

}  // namespace

class TestTopology : public QObject {
  Q_OBJECT

 private slots:
  // coord(rank) and rank(coord) against the hand-built table, both ways, for every layout.
  void roundTrip_data() { add_layouts(); }
  void roundTrip() {
    QFETCH(int, pp);
    QFETCH(int, tp);
    QFETCH(int, dp);
    const int world = pp * tp * dp;
    const Topology topo = Topology::make({pp, tp, dp}, world);
    QCOMPARE(topo.world(), world);
    QCOMPARE(topo.pp(), pp);
    QCOMPARE(topo.tp(), tp);
    QCOMPARE(topo.dp(), dp);
    const std::vector<Coord> table = enumerate(pp, tp, dp);
    QCOMPARE(int(table.size()), world);
    for (int r = 0; r < world; ++r) {
      const Coord want = table[size_t(r)];
      const Coord got = topo.coord(r);
      QVERIFY2(got == want, qPrintable(QString("rank %1: got (pp %2, tp %3, dp %4), want (pp %5, "
                                               "tp %6, dp %7)")
                                           .arg(r)
                                           .arg(got.pp)
                                           .arg(got.tp)
                                           .arg(got.dp)
                                           .arg(want.pp)
                                           .arg(want.tp)
                                           .arg(want.dp)));
      QCOMPARE(topo.rank(want), r);
      QCOMPARE(topo.rank(topo.coord(r)), r);
    }
  }

  // Each dimension's groups against the table: membership and order, a partition of the world,
  // sizes, one color per group in [0, world / size), names, and tp groups as consecutive ranks.
  void groups_data() { add_layouts(); }
  void groups() {
    QFETCH(int, pp);
    QFETCH(int, tp);
    QFETCH(int, dp);
    const int world = pp * tp * dp;
    const Topology topo = Topology::make({pp, tp, dp}, world);
    const std::vector<Coord> table = enumerate(pp, tp, dp);
    for (ParallelDim dim : kDims) {
      const int extent = dim == ParallelDim::Tp ? tp : dim == ParallelDim::Pp ? pp : dp;
      const char* name = dim == ParallelDim::Tp ? "tp" : dim == ParallelDim::Pp ? "pp" : "dp";
      QCOMPARE(topo.size(dim), extent);
      std::vector<int> seen(size_t(world), 0);  // times each rank appears across distinct groups
      std::map<int, std::vector<int>> by_color;
      for (int r = 0; r < world; ++r) {
        const std::vector<int> got = dim == ParallelDim::Tp   ? topo.tp_group(r)
                                     : dim == ParallelDim::Pp ? topo.pp_group(r)
                                                              : topo.dp_group(r);
        const std::vector<int> want = expected_group(table, r, dim);
        QVERIFY2(got == want, qPrintable(QString("%1 group of rank %2: got %3, want %4")
                                             .arg(name)
                                             .arg(r)
                                             .arg(show(got), show(want))));
        QCOMPARE(int(got.size()), extent);
        QCOMPARE(topo.group(dim, r), got);
        // Group rank == coordinate: rank r sits at index along(r).
        QCOMPARE(got[size_t(along(table[size_t(r)], dim))], r);
        const int color = dim == ParallelDim::Tp   ? topo.tp_color(r)
                          : dim == ParallelDim::Pp ? topo.pp_color(r)
                                                   : topo.dp_color(r);
        QCOMPARE(topo.color(dim, r), color);
        QVERIFY2(color >= 0 && color < world / extent,
                 qPrintable(QString("%1 color %2 of rank %3").arg(name).arg(color).arg(r)));
        QCOMPARE(qs(topo.group_name(dim, r)), QString("%1[%2]").arg(name).arg(color));
        auto [it, fresh] = by_color.emplace(color, got);
        if (fresh) {
          for (int m : got) ++seen[size_t(m)];
        } else {
          // Same color, same group: colors are unique per group.
          QVERIFY2(it->second == got, qPrintable(QString("%1 color %2 names %3 and %4")
                                                     .arg(name)
                                                     .arg(color)
                                                     .arg(show(it->second), show(got))));
        }
        if (dim == ParallelDim::Tp)
          for (int i = 0; i < int(got.size()); ++i) QCOMPARE(got[size_t(i)], got[0] + i);
      }
      QCOMPARE(int(by_color.size()), world / extent);
      for (int r = 0; r < world; ++r)
        QVERIFY2(seen[size_t(r)] == 1,
                 qPrintable(
                     QString("rank %1 is in %2 %3 groups").arg(r).arg(seen[size_t(r)]).arg(name)));
    }
  }

  // The 2x2x2 table of the header comment, written out.
  void headerExample() {
    const Topology topo = Topology::make({2, 2, 2}, 8);
    QCOMPARE(topo.tp_group(5), (std::vector<int>{4, 5}));
    QCOMPARE(topo.pp_group(5), (std::vector<int>{1, 5}));
    QCOMPARE(topo.dp_group(5), (std::vector<int>{5, 7}));
    QCOMPARE(qs(topo.group_name(ParallelDim::Tp, 6)), QString("tp[3]"));
    QCOMPARE(qs(topo.group_name(ParallelDim::Pp, 3)), QString("pp[3]"));
    QCOMPARE(qs(topo.group_name(ParallelDim::Dp, 4)), QString("dp[2]"));
    QVERIFY(topo.coord(6) == (Coord{1, 0, 1}));
  }

  void dpResolution_data() {
    QTest::addColumn<int>("pp");
    QTest::addColumn<int>("tp");
    QTest::addColumn<int>("world");
    QTest::addColumn<int>("dp");
    QTest::newRow("1x1 on 1") << 1 << 1 << 1 << 1;
    QTest::newRow("1x1 on 8") << 1 << 1 << 8 << 8;
    QTest::newRow("2x2 on 8") << 2 << 2 << 8 << 2;
    QTest::newRow("2x4 on 8") << 2 << 4 << 8 << 1;
    QTest::newRow("1x3 on 12") << 1 << 3 << 12 << 4;
    QTest::newRow("4x1 on 16") << 4 << 1 << 16 << 4;
    QTest::newRow("3x2 on 30") << 3 << 2 << 30 << 5;
  }
  void dpResolution() {
    QFETCH(int, pp);
    QFETCH(int, tp);
    QFETCH(int, world);
    QFETCH(int, dp);
    TopologyConfig config;  // dp defaults to -1
    config.pp = pp;
    config.tp = tp;
    QCOMPARE(config.dp, int64_t(-1));
    const Topology topo = Topology::make(config, world);
    QCOMPARE(topo.dp(), dp);
    QCOMPARE(topo.world(), world);
    QCOMPARE(topo.pp() * topo.tp() * topo.dp(), world);
  }

  // Every broken rule: InvalidArgument whose message names the field and the rule.
  void invalidLayout_data() {
    QTest::addColumn<qlonglong>("pp");
    QTest::addColumn<qlonglong>("tp");
    QTest::addColumn<qlonglong>("dp");
    QTest::addColumn<int>("world");
    QTest::addColumn<QStringList>("needles");
    QTest::newRow("pp 0") << 0LL << 1LL << -1LL << 8 << QStringList{"parallel.pp", ">= 1", "0"};
    QTest::newRow("pp -1") << -1LL << 1LL << 1LL << 8 << QStringList{"parallel.pp", ">= 1"};
    QTest::newRow("tp 0") << 1LL << 0LL << -1LL << 8 << QStringList{"parallel.tp", ">= 1"};
    QTest::newRow("tp -2") << 1LL << -2LL << 2LL << 8 << QStringList{"parallel.tp", ">= 1"};
    QTest::newRow("dp 0") << 1LL << 1LL << 0LL << 8 << QStringList{"parallel.dp", ">= 1 or -1"};
    QTest::newRow("dp -2") << 1LL << 1LL << -2LL << 8 << QStringList{"parallel.dp", "-1"};
    QTest::newRow("dp -1 indivisible")
        << 2LL << 3LL << -1LL << 8 << QStringList{"parallel.dp", "2 x 3 = 6", "divide", "8"};
    QTest::newRow("product 6 on 8")
        << 2LL << 3LL << 1LL << 8
        << QStringList{"parallel.dp: pp x tp x dp = 2 x 3 x 1 = 6 does not equal the world size 8"};
    QTest::newRow("product 16 on 8")
        << 2LL << 2LL << 4LL << 8 << QStringList{"parallel.dp", "= 16", "world size 8"};
    QTest::newRow("product 4 on 8")
        << 1LL << 2LL << 2LL << 8 << QStringList{"parallel.dp", "= 4", "world size 8"};
    QTest::newRow("pp above world")
        << 16LL << 1LL << -1LL << 8 << QStringList{"parallel.pp", "16", "world size 8"};
    QTest::newRow("tp above world")
        << 1LL << 9LL << 1LL << 8 << QStringList{"parallel.tp", "9", "world size 8"};
    QTest::newRow("dp huge") << 2LL << 2LL << (1LL << 62) << 8
                             << QStringList{"parallel.dp", "world size 8"};
    QTest::newRow("world 0") << 1LL << 1LL << -1LL << 0
                             << QStringList{"parallel.world_size", ">= 1"};
  }
  void invalidLayout() {
    QFETCH(qlonglong, pp);
    QFETCH(qlonglong, tp);
    QFETCH(qlonglong, dp);
    QFETCH(int, world);
    QFETCH(QStringList, needles);
    const auto [type, msg] = caught([&] { (void)Topology::make({pp, tp, dp}, world); });
    QVERIFY2(type == "InvalidArgument", qPrintable(qs(type + ": " + msg)));
    for (const QString& n : needles)
      QVERIFY2(qs(msg).contains(n), qPrintable(QString("\"%1\" lacks \"%2\"").arg(qs(msg), n)));
  }

  // Ranks and coordinates outside the layout are refused.
  void outOfRange() {
    const Topology topo = Topology::make({2, 2, 2}, 8);
    for (int r : {-1, 8, 100}) {
      QCOMPARE(caught([&] { (void)topo.coord(r); }).first, std::string("InvalidArgument"));
      QCOMPARE(caught([&] { (void)topo.tp_group(r); }).first, std::string("InvalidArgument"));
      QCOMPARE(caught([&] { (void)topo.dp_color(r); }).first, std::string("InvalidArgument"));
    }
    for (Coord c : {Coord{2, 0, 0}, Coord{0, 2, 0}, Coord{0, 0, 2}, Coord{-1, 0, 0},
                    Coord{0, -1, 0}, Coord{0, 0, -1}})
      QCOMPARE(caught([&] { (void)topo.rank(c); }).first, std::string("InvalidArgument"));
    QCOMPARE(caught([&] { (void)topo.rank(Coord{1, 1, 1}); }).first, std::string(""));
  }

  void modelFits_data() {
    QTest::addColumn<int>("pp");
    QTest::addColumn<int>("tp");
    QTest::addColumn<int>("dp");
    QTest::addColumn<qlonglong>("blocks");
    QTest::addColumn<qlonglong>("heads");
    QTest::addColumn<qlonglong>("width");
    QTest::addColumn<qlonglong>("micro");
    QTest::addColumn<qlonglong>("batch");
    QTest::addColumn<QStringList>("needles");  // empty: must pass
    QTest::newRow("ok 2x2x2") << 2 << 2 << 2 << 4LL << 4LL << 64LL << 4LL << 32LL << QStringList{};
    QTest::newRow("ok mlp tp 3") << 1 << 3 << 1 << 3LL << 0LL << 7LL << 1LL << 5LL << QStringList{};
    QTest::newRow("ok blocks == stages")
        << 4 << 1 << 1 << 4LL << 2LL << 8LL << 2LL << 2LL << QStringList{};
    QTest::newRow("heads") << 1 << 4 << 1 << 4LL << 6LL << 64LL << 1LL << 8LL
                           << QStringList{"parallel.tp: 4 does not divide model.gpt.heads = 6"};
    QTest::newRow("width") << 1 << 4 << 1 << 4LL << 8LL << 66LL << 1LL << 8LL
                           << QStringList{"parallel.tp: 4 does not divide model.gpt.width = 66"};
    QTest::newRow("blocks") << 5 << 1 << 1 << 4LL << 4LL << 64LL << 1LL << 8LL
                            << QStringList{"parallel.pp: 5 stages but the model has 4 blocks"};
    QTest::newRow("blocks mlp") << 2 << 2 << 1 << 1LL << 0LL << 5LL << 1LL << 8LL
                                << QStringList{"parallel.pp", "2 stages", "1 blocks"};
    QTest::newRow("micro 0") << 1 << 1 << 2 << 2LL << 2LL << 8LL << 0LL << 8LL
                             << QStringList{"parallel.micro_batches", ">= 1", "0"};
    QTest::newRow("micro -3") << 1 << 1 << 2 << 2LL << 2LL << 8LL << -3LL << 8LL
                              << QStringList{"parallel.micro_batches", ">= 1", "-3"};
    QTest::newRow("micro indivisible")
        << 1 << 1 << 2 << 2LL << 2LL << 8LL << 3LL << 8LL
        << QStringList{"parallel.micro_batches", "3 does not divide", "8 / 2 = 4"};
    // 16 divides the whole batch but not the per-replica one.
    QTest::newRow("micro vs per-replica")
        << 1 << 1 << 4 << 2LL << 2LL << 8LL << 16LL << 32LL
        << QStringList{"parallel.micro_batches", "16 does not divide", "32 / 4 = 8"};
    QTest::newRow("batch vs dp") << 1 << 1 << 4 << 2LL << 2LL << 8LL << 1LL << 10LL
                                 << QStringList{"train.batch_size", "10", "parallel.dp = 4"};
  }
  void modelFits() {
    QFETCH(int, pp);
    QFETCH(int, tp);
    QFETCH(int, dp);
    QFETCH(qlonglong, blocks);
    QFETCH(qlonglong, heads);
    QFETCH(qlonglong, width);
    QFETCH(qlonglong, micro);
    QFETCH(qlonglong, batch);
    QFETCH(QStringList, needles);
    const Topology topo = Topology::make({pp, tp, dp}, pp * tp * dp);
    const auto [type, msg] =
        caught([&] { check_model_fits(topo, blocks, heads, width, micro, batch); });
    if (needles.isEmpty()) {
      QVERIFY2(type.empty(), qPrintable(qs(type + ": " + msg)));
      return;
    }
    QVERIFY2(type == "InvalidArgument", qPrintable(qs(type + ": " + msg)));
    for (const QString& n : needles)
      QVERIFY2(qs(msg).contains(n), qPrintable(QString("\"%1\" lacks \"%2\"").arg(qs(msg), n)));
  }

  // Each rank's three communicators on the threads backend: size, rank == coordinate, name, and
  // an all-reduce of the world rank over each group equal to the sum of the expected members.
  void buildGroups_data() {
    QTest::addColumn<int>("pp");
    QTest::addColumn<int>("tp");
    QTest::addColumn<int>("dp");
    QTest::newRow("2x2x2") << 2 << 2 << 2;
    QTest::newRow("1x2x4") << 1 << 2 << 4;
    QTest::newRow("4x2x1") << 4 << 2 << 1;
    QTest::newRow("2x1x4") << 2 << 1 << 4;
  }
  void buildGroups() {
    QFETCH(int, pp);
    QFETCH(int, tp);
    QFETCH(int, dp);
    const int world = 8;
    QCOMPARE(pp * tp * dp, world);
    const Topology topo = Topology::make({pp, tp, dp}, world);
    const std::vector<Coord> table = enumerate(pp, tp, dp);

    struct Seen {
      int size = -1, rank = -1;
      std::string name;
      float sum = -1;
    };
    // [world rank][dim]
    std::vector<std::array<Seen, 3>> seen(static_cast<size_t>(world));
    CommOptions options;
    options.timeout = std::chrono::milliseconds(20000);
    const auto outer = caught([&] {
      run_threads(world, options, [&](Communicator& c) {
        Topology::Groups g = topo.build_groups(c);
        Communicator* comms[3] = {g.tp.get(), g.pp.get(), g.dp.get()};
        for (int d = 0; d < 3; ++d) {
          SL_ENFORCE(comms[d] != nullptr, "rank {}: no communicator for dim {}", c.rank(), d);
          Seen& s = seen[size_t(c.rank())][size_t(d)];
          s.size = comms[d]->size();
          s.rank = comms[d]->rank();
          s.name = comms[d]->name();
          float v = float(c.rank());
          comms[d]->all_reduce(std::span<float>(&v, 1), ReduceOp::Sum);
          s.sum = v;
        }
      });
    });
    QVERIFY2(outer.first.empty(), qPrintable(qs(outer.first + ": " + outer.second)));

    for (int r = 0; r < world; ++r) {
      for (int d = 0; d < 3; ++d) {
        const ParallelDim dim = kDims[d];
        const Seen& s = seen[size_t(r)][size_t(d)];
        const std::vector<int> members = expected_group(table, r, dim);
        int want_sum = 0;
        for (int m : members) want_sum += m;
        const QString where = QString("rank %1 dim %2").arg(r).arg(dim_name(dim));
        QVERIFY2(s.size == int(members.size()),
                 qPrintable(where + QString(": size %1").arg(s.size)));
        QVERIFY2(s.rank == along(table[size_t(r)], dim),
                 qPrintable(where + QString(": group rank %1").arg(s.rank)));
        QVERIFY2(s.name == topo.group_name(dim, r), qPrintable(where + ": name " + qs(s.name)));
        QVERIFY2(s.sum == float(want_sum),
                 qPrintable(where + QString(": sum %1, want %2").arg(s.sum).arg(want_sum)));
      }
    }
  }

  // A communicator of the wrong size is refused before any split.
  void buildGroupsWrongWorld() {
    const Topology topo = Topology::make({2, 2, 1}, 4);
    std::vector<std::string> types(2);
    const auto outer = caught([&] {
      run_threads(2, CommOptions{}, [&](Communicator& c) {
        types[size_t(c.rank())] = caught([&] { (void)topo.build_groups(c); }).first;
      });
    });
    QVERIFY2(outer.first.empty(), qPrintable(qs(outer.first + ": " + outer.second)));
    for (const std::string& t : types) QCOMPARE(t, std::string("InvalidArgument"));
  }
};

QTEST_GUILESS_MAIN(TestTopology)
#include "tst_topology.moc"
