// Who holds what (engine/sharding/holdings.h) against the strategies' definitions and the ledger:
// on 4 thread ranks after one real step of the MLP (ddp, zero1, zero2, fsdp) and of the GPT in a
// 2 x 2 tp x dp and a 2 x 2 pp x dp layout. The expected holdings are written from the strategies'
// definitions (ZeRO paper section 5; tensor and pipeline slicing), not from the code under test:
//   - replicated arrays cover the whole model on every rank;
//   - sharded arrays are disjoint between the ranks that share them and together cover the model;
//   - the ledger's bytes are 4 bytes per held element (per state array for the optimizer state)
//     plus padding, and padding is less than the world size per padded unit (ZeRO pads the flat
//     buffer, FSDP every block: element_map.h, the planner's Psi' and Psi'').
#include <QtTest>

#include <algorithm>
#include <map>
#include <mutex>

#include "engine/core/memory.h"
#include "engine/run/rank_runner.h"
#include "engine/run/seed_optimizers.h"
#include "engine/sharding/holdings.h"
#include "engine/sharding/sharded_options_from_job.h"
#include "kernels/cpu/gemm.h"
#include "tests/parallel/parallel_test_util.h"

using namespace shardlab;
using namespace shardlab::ptest;

namespace {

struct RankState {
  RankHoldings held;
  MemoryFigures bytes;
  int64_t full = 0;
  int blocks = 0;
  std::vector<TensorExtent> tensors;
  int pp = 0, tp = 0, dp = 0;  // this rank's coordinates
};

std::vector<RankState> after_one_step(JobSpec job) {
  job.train.steps = 1;
  job.train.eval_every = 0;
  const Datasets& data = data_of(job);
  return on_thread_ranks<RankState>(
      static_cast<int>(job.parallel.world_size), [&](Communicator& c, RankState& st) {
        std::unique_ptr<IShardedOptimizer> opt = make_sharded_optimizer(c, sharded_options(job));
        OptimizeInput in;
        in.train = data.train.get();
        opt->optimize(in);
        st.held = holdings_of(*opt);
        st.bytes = opt->memory_after_last_step().current;
        st.full = opt->full_layout().size();
        st.blocks = opt->full_layout().num_blocks();
        st.tensors = tensor_extents(opt->full_layout());
        const Coord rc = opt->topology().coord(c.rank());
        st.pp = rc.pp;
        st.tp = rc.tp;
        st.dp = rc.dp;
      });
}

using Ranges = std::vector<IndexRange>;

QString show(const Ranges& r) {
  QStringList parts;
  for (const IndexRange& x : r) parts << QString("[%1, %2)").arg(x.begin).arg(x.end);
  return parts.join(' ');
}

bool whole(const Ranges& r, int64_t full) {
  return r.size() == 1 && r[0].begin == 0 && r[0].end == full;
}

// Each element of [0, full) in exactly one of the lists.
bool partition(const std::vector<Ranges>& lists, int64_t full, QString& why) {
  std::vector<int> count(static_cast<size_t>(full), 0);
  for (const Ranges& rs : lists)
    for (const IndexRange& r : rs) {
      if (r.begin < 0 || r.end > full || r.begin >= r.end) {
        why = QString("bad range [%1, %2)").arg(r.begin).arg(r.end);
        return false;
      }
      for (int64_t i = r.begin; i < r.end; ++i) ++count[static_cast<size_t>(i)];
    }
  for (int64_t i = 0; i < full; ++i)
    if (count[static_cast<size_t>(i)] != 1) {
      why = QString("element %1 held %2 times").arg(i).arg(count[static_cast<size_t>(i)]);
      return false;
    }
  return true;
}

// The ledger's bytes for `ranges` of `arrays` fp32 arrays: exactly, or with less than `slack`
// padding elements per array.
bool ledger_agrees(int64_t ledger, const Ranges& ranges, int64_t arrays, int64_t slack,
                   QString& why) {
  const int64_t held = 4 * arrays * elements_in(ranges);
  why = QString("ledger %1 B, held %2 B (%3 arrays), padding allowed < %4 elements per array")
            .arg(ledger)
            .arg(held)
            .arg(arrays)
            .arg(slack);
  return ledger >= held && ledger - held < 4 * arrays * std::max<int64_t>(slack, 1);
}

// Collects what every rank of a threads run publishes.
class Collect : public telemetry::TelemetrySink {
 public:
  void publish(telemetry::Event e) noexcept override {
    std::lock_guard lock(mu_);
    if (auto* l = std::get_if<telemetry::LayoutEvent>(&e.payload)) layouts[e.rank].push_back(*l);
  }
  std::map<int, std::vector<telemetry::LayoutEvent>> layouts;

 private:
  std::mutex mu_;
};

Ranges ranges_of(const std::vector<telemetry::LayoutRange>& rs) {
  Ranges out;
  for (const auto& r : rs) out.push_back({r.begin, r.end});
  return out;
}

}  // namespace

class TestHoldings : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    kernels::use_single_blas_thread();
    if (!have_fashion_mnist()) QSKIP(kNoFashionMnist);
  }

  void oneDimensionalStrategies_data() {
    QTest::addColumn<QString>("strategy");
    for (const char* s : {"ddp", "zero1", "zero2", "fsdp"}) QTest::newRow(s) << QString(s);
  }

  void oneDimensionalStrategies() {
    QFETCH(QString, strategy);
    const int world = 4;
    const std::vector<RankState> ranks =
        after_one_step(mlp_job(strategy.toStdString(), world, "adam"));
    const int64_t full = ranks[0].full;
    const bool params_sharded = strategy == "fsdp";
    const bool grads_sharded = strategy == "zero2" || strategy == "fsdp";
    const bool state_sharded = strategy != "ddp";
    // Padding: none for ddp; ZeRO pads its flat buffer once, FSDP every block.
    const int64_t units = strategy == "fsdp" ? ranks[0].blocks : 1;
    const int64_t slack = strategy == "ddp" ? 0 : world * units;

    std::vector<Ranges> params, grads, state;
    for (const RankState& r : ranks) {
      QCOMPARE(r.full, full);
      QCOMPARE(r.held.state_arrays,  // Adam's moments, named as in PyTorch
               (std::vector<std::string>{"exp_avg", "exp_avg_sq"}));
      params.push_back(r.held.params);
      grads.push_back(r.held.grads);
      state.push_back(r.held.optimizer_state);
      if (!params_sharded) QVERIFY2(whole(r.held.params, full), qPrintable(show(r.held.params)));
      if (!grads_sharded) QVERIFY2(whole(r.held.grads, full), qPrintable(show(r.held.grads)));
      if (!state_sharded)
        QVERIFY2(whole(r.held.optimizer_state, full), qPrintable(show(r.held.optimizer_state)));
      QString why;
      QVERIFY2(ledger_agrees(r.bytes[MemCategory::params], r.held.params, 1,
                             params_sharded ? slack : (strategy == "ddp" ? 0 : slack), why),
               qPrintable("params: " + why));
      QVERIFY2(ledger_agrees(r.bytes[MemCategory::grads], r.held.grads, 1,
                             strategy == "ddp" ? 0 : slack, why),
               qPrintable("grads: " + why));
      QVERIFY2(ledger_agrees(r.bytes[MemCategory::optimizer_state], r.held.optimizer_state, 2,
                             strategy == "ddp" ? 0 : slack, why),
               qPrintable("optimizer_state: " + why));
    }
    QString why;
    if (params_sharded) QVERIFY2(partition(params, full, why), qPrintable("params: " + why));
    if (grads_sharded) QVERIFY2(partition(grads, full, why), qPrintable("grads: " + why));
    if (state_sharded) QVERIFY2(partition(state, full, why), qPrintable("state: " + why));

    // The tensors tile the model in order.
    int64_t next = 0;
    for (const TensorExtent& t : ranks[0].tensors) {
      QCOMPARE(t.offset, next);
      QVERIFY(t.size > 0 && !t.name.empty());
      next += t.size;
    }
    QCOMPARE(next, full);
  }

  // 2 x 2 layouts of the GPT with zero2 across dp: a tp rank holds its slice of each tensor (the
  // two tp ranks' slices together cover the model, the replicated layer norms on both); a pp
  // rank its stage's blocks (the two stages disjoint, together the model). Within the dp pair
  // of a stage or tp slice, zero2 shards gradients and state.
  void modelParallelLayouts_data() {
    QTest::addColumn<int>("pp");
    QTest::addColumn<int>("tp");
    QTest::newRow("tp2 x dp2") << 1 << 2;
    QTest::newRow("pp2 x dp2") << 2 << 1;
  }

  void modelParallelLayouts() {
    QFETCH(int, pp);
    QFETCH(int, tp);
    JobSpec job = gpt_job("zero2", 4, corpus_vocab());
    set_grid(job, {.pp = pp, .tp = tp, .dp = 2, .micro_batches = pp > 1 ? 2 : 1});
    const std::vector<RankState> ranks = after_one_step(job);
    const int64_t full = ranks[0].full;

    // Every element's parameter is held by someone; pipeline stages hold disjoint blocks.
    std::vector<Ranges> dp0_params;  // the dp-0 rank of each (stage, tp slice)
    for (const RankState& r : ranks)
      if (r.dp == 0) dp0_params.push_back(r.held.params);
    QString why;
    if (tp == 1) {
      QVERIFY2(partition(dp0_params, full, why), qPrintable("stages: " + why));
    } else {
      std::vector<int> held(static_cast<size_t>(full), 0);
      for (const Ranges& rs : dp0_params)
        for (const IndexRange& x : rs)
          for (int64_t i = x.begin; i < x.end; ++i) ++held[static_cast<size_t>(i)];
      QVERIFY(std::all_of(held.begin(), held.end(), [](int n) { return n >= 1 && n <= 2; }));
      // Neither tp rank holds the whole model.
      for (const Ranges& rs : dp0_params) QVERIFY2(elements_in(rs) < full, qPrintable(show(rs)));
    }

    for (const RankState& r : ranks) {
      // The dp pair holds the same parameters and splits the gradients and state between them.
      const RankState* peer = nullptr;
      for (const RankState& o : ranks)
        if (o.pp == r.pp && o.tp == r.tp && o.dp != r.dp) peer = &o;
      QVERIFY(peer != nullptr);
      QCOMPARE(show(r.held.params), show(peer->held.params));
      QCOMPARE(r.held.grads.size(), r.held.optimizer_state.size());
      QCOMPARE(elements_in(r.held.grads) + elements_in(peer->held.grads),
               elements_in(r.held.params));
      QVERIFY2(ledger_agrees(r.bytes[MemCategory::params], r.held.params, 1, 2 * r.blocks, why),
               qPrintable("params: " + why));
      QVERIFY2(ledger_agrees(r.bytes[MemCategory::optimizer_state], r.held.optimizer_state, 2,
                             2 * r.blocks, why),
               qPrintable("optimizer_state: " + why));
    }
  }

  // The LAYOUT event each rank of a real threads run publishes (run_rank) carries the holdings
  // checked above, and its bytes add up: 4 bytes per element of each list plus its padding equal
  // the ledger's bytes after the run exactly (per state array for the optimizer state), and the
  // planner's bytes it carries equal them too.
  void publishedLayoutEvent_data() {
    QTest::addColumn<QString>("strategy");
    QTest::addColumn<int>("tp");
    QTest::addColumn<int>("pp");
    for (const char* s : {"ddp", "zero1", "zero2", "fsdp"})
      QTest::newRow(s) << QString(s) << 1 << 1;
    QTest::newRow("zero2 tp2 x dp2") << QString("zero2") << 2 << 1;
    QTest::newRow("zero1 pp2 x dp2") << QString("zero1") << 1 << 2;
  }

  void publishedLayoutEvent() {
    QFETCH(QString, strategy);
    QFETCH(int, tp);
    QFETCH(int, pp);
    JobSpec job = tp == 1 && pp == 1 ? mlp_job(strategy.toStdString(), 4, "adam")
                                     : gpt_job(strategy.toStdString(), 4, corpus_vocab());
    if (tp > 1 || pp > 1)
      set_grid(job, {.pp = pp, .tp = tp, .dp = 2, .micro_batches = pp > 1 ? 2 : 1});
    job.train.steps = 1;
    job.train.eval_every = 0;
    const std::vector<RankState> expected = after_one_step(job);

    Collect sink;
    RankRunOptions options;
    options.telemetry = [&](int) -> telemetry::TelemetrySink* { return &sink; };
    const ParallelRunResult run = run_threads_job(job, data_of(job), options);
    QCOMPARE(int(sink.layouts.size()), 4);
    for (const auto& [rank, events] : sink.layouts) {
      QCOMPARE(int(events.size()), 1);  // once, at the start
      const telemetry::LayoutEvent& e = events[0];
      const RankState& want = expected[static_cast<size_t>(rank)];
      QCOMPARE(QString::fromStdString(e.strategy), strategy);
      QCOMPARE(show(ranges_of(e.params)), show(want.held.params));
      QCOMPARE(show(ranges_of(e.grads)), show(want.held.grads));
      QCOMPARE(show(ranges_of(e.optimizer_state)), show(want.held.optimizer_state));
      QVERIFY(!e.truncated);
      QCOMPARE(int(e.tensors.size()), int(want.tensors.size()));
      for (size_t i = 0; i < e.tensors.size(); ++i) {
        QCOMPARE(e.tensors[i].name, want.tensors[i].name);
        QCOMPARE(e.tensors[i].offset, want.tensors[i].offset);
        QCOMPARE(e.tensors[i].size, want.tensors[i].size);
      }
      const MemoryFigures& ledger = run.ranks[static_cast<size_t>(rank)].memory.current;
      const auto arrays = static_cast<int64_t>(e.state_arrays.size());
      QCOMPARE(arrays, int64_t{2});
      QCOMPARE(4 * (elements_in(want.held.params) + e.params_padding), ledger[MemCategory::params]);
      QCOMPARE(4 * (elements_in(want.held.grads) + e.grads_padding), ledger[MemCategory::grads]);
      QCOMPARE(4 * arrays * (elements_in(want.held.optimizer_state) + e.state_padding),
               ledger[MemCategory::optimizer_state]);
      QCOMPARE(e.planned[0], ledger[MemCategory::params]);
      QCOMPARE(e.planned[1], ledger[MemCategory::grads]);
      QCOMPARE(e.planned[2], ledger[MemCategory::optimizer_state]);
      QVERIFY(!e.formula.empty());
    }
  }
};

QTEST_GUILESS_MAIN(TestHoldings)
#include "tst_holdings.moc"
