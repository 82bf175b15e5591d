// HybridShardedOptimizer's state, as tst_sharded_state checks the 1-D strategies': serialize /
// deserialize round trips that resume a run exactly, refusal of bytes written by another layout,
// strategy, rank, model or batch (with nothing changed), synchronize_optimizer_state, and early
// stopping against the single-process Trainer; and the named types of the seed's API
// (AiDotNet.DistributedTraining, engine/run/seed_optimizers.h: FsdpOptimizer,
// TensorParallelOptimizer, HybridShardedOptimizer built from a base optimizer instance) against
// the factories the jobs use. Ranks run as threads; every assertion runs on the test's thread
// after the ranks have finished.
#include <QElapsedTimer>
#include <QtTest>

#include "engine/comm/threads/world.h"
#include "engine/job/build.h"
#include "engine/optim/optimizer.h"
#include "engine/run/seed_optimizers.h"
#include "engine/sharding/sharded_options_from_job.h"
#include "kernels/cpu/gemm.h"
#include "tests/parallel/caught.h"
#include "tests/parallel/parallel_test_util.h"

using namespace shardlab;
using namespace shardlab::ptest;

using shardlab::test::caught;

namespace {

struct RankState {
  std::vector<float> params, params_after;
  std::vector<uint8_t> bytes;
  std::vector<double> losses;
  int64_t steps_done = -1, steps_after = -1;
  bool flag = false, flag_after = false;
  std::pair<std::string, std::string> error;
  TrainResult result;
};

// The tiny GPT as pp x tp x dp (dp -1: the rest of 4 ranks) with `strategy` over dp, 1F1B over 2
// micro-batches, Adam on a warm-up cosine schedule (the step count matters) and evaluations every
// 3 steps with a patience that never fires (live early-stopping state).
JobSpec hybrid_job(const std::string& strategy, int pp, int tp, int dp) {
  JobSpec j = gpt_job(strategy, 4, corpus_vocab());
  j.train.steps = 8;
  j.train.batch_size = 8;
  make_state_live(j);
  set_grid(j, {.pp = pp, .tp = tp, .dp = dp, .micro_batches = 2, .schedule = "1f1b"});
  return j;
}

// fn(optimizer, state) on every rank with a freshly created optimizer for `job`.
template <typename F>
std::vector<RankState> on_ranks(const JobSpec& job, F&& fn) {
  return on_thread_ranks<RankState>(static_cast<int>(job.parallel.world_size),
                                    [&](Communicator& c, RankState& st) {
                                      fn(*make_sharded_optimizer(c, sharded_options(job)), st);
                                    });
}

OptimizeInput input(int64_t max_steps = 0) {
  OptimizeInput in;
  in.train = corpus_data().train.get();
  in.eval = corpus_data().eval.get();
  in.max_steps = max_steps;
  return in;
}

bool contains_ci(const std::string& haystack, const char* needle) {
  return QString::fromStdString(haystack).contains(QString(needle), Qt::CaseInsensitive);
}

void add_layouts() {
  QTest::addColumn<QString>("strategy");
  QTest::addColumn<int>("pp");
  QTest::addColumn<int>("tp");
  QTest::addColumn<int>("dp");
  QTest::addRow("zero1/2x1x2") << "zero1" << 2 << 1 << 2;
  QTest::addRow("ddp/1x2x-1") << "ddp" << 1 << 2 << -1;
  QTest::addRow("zero2/2x2x1") << "zero2" << 2 << 2 << 1;
}

JobSpec fetched_job() {
  QFETCH(QString, strategy);
  QFETCH(int, pp);
  QFETCH(int, tp);
  QFETCH(int, dp);
  return hybrid_job(strategy.toStdString(), pp, tp, dp);
}

}  // namespace

class TestHybridState : public QObject {
  Q_OBJECT

  QElapsedTimer clock_;

 private slots:
  void initTestCase() {
    kernels::use_single_blas_thread();
    clock_.start();
    QVERIFY(corpus_data().train != nullptr);
  }

  void cleanupTestCase() { qInfo("suite ran %.1f s", static_cast<double>(clock_.elapsed()) / 1e3); }

  // serialize() after k steps; fresh optimizers deserialize their own rank's bytes and finish the
  // run: the same losses and parameters, bit for bit, as a run that was never interrupted.
  void roundTripResumesExactly_data() { add_layouts(); }

  void roundTripResumesExactly() {
    const JobSpec job = fetched_job();
    const int64_t cut = 5;  // after the evaluation at 3, mid-epoch
    const auto full = on_ranks(
        job, [&](IShardedOptimizer& opt, RankState& st) { st.result = opt.optimize(input()); });
    const auto first = on_ranks(job, [&](IShardedOptimizer& opt, RankState& st) {
      st.result = opt.optimize(input(cut));
      st.bytes = opt.serialize();
      st.params = opt.gather_params();
    });
    const auto rest = on_ranks(job, [&](IShardedOptimizer& opt, RankState& st) {
      opt.deserialize(first[static_cast<size_t>(opt.rank())].bytes);
      st.steps_done = opt.steps_done();
      st.params = opt.gather_params();
      st.result = opt.optimize(input());
      st.steps_after = opt.steps_done();
    });
    for (size_t r = 0; r < full.size(); ++r) {
      QVERIFY(!first[r].bytes.empty());
      QCOMPARE(rest[r].steps_done, cut);
      QVERIFY2(bit_equal(rest[r].params, first[r].params),
               qPrintable(QString("rank %1: restored params differ").arg(r)));
      QCOMPARE(rest[r].steps_after, job.train.steps);
      std::vector<double> joined = first[r].result.losses;
      joined.insert(joined.end(), rest[r].result.losses.begin(), rest[r].result.losses.end());
      QVERIFY2(joined == full[r].result.losses, qPrintable(QString("rank %1: losses").arg(r)));
      const int64_t at = first_bit_difference(rest[r].result.params, full[r].result.params);
      QVERIFY2(at < 0, qPrintable(QString("rank %1: final params differ at %2").arg(r).arg(at)));
    }
  }

  // Bytes written on another layout, strategy, rank, model, bucket cut, batch or micro-batch
  // count, or damaged bytes, are refused with an error naming what differs; nothing changes.
  void deserializeRefusesMismatch() {
    const JobSpec job = hybrid_job("zero1", 2, 1, 2);
    const auto src = on_ranks(job, [&](IShardedOptimizer& opt, RankState& st) {
      opt.optimize(input(2));
      st.bytes = opt.serialize();
    });
    struct Case {
      const char* name;
      JobSpec target;
      const char* says;  // in the message; null: a FormatError (damaged bytes)
      int from_rank_xor = 0;
      int damage = 0;  // 1 truncated, 2 bad magic, 3 empty
    };
    std::vector<Case> cases;
    cases.push_back({"layout", hybrid_job("zero1", 1, 2, 2), "pp x tp x dp"});
    cases.push_back({"strategy", hybrid_job("zero2", 2, 1, 2), "strategy"});
    cases.push_back({"rank", job, "rank", 1});
    JobSpec wider = job;
    wider.model.gpt.width = 24;
    cases.push_back({"model", wider, "parameters"});
    JobSpec buckets = job;
    buckets.parallel.bucket_mb = 0.001;
    cases.push_back({"bucket cut", buckets, "bucket_mb"});
    JobSpec batch = job;
    batch.train.batch_size = 16;
    cases.push_back({"batch size", batch, "batch_size"});
    JobSpec micro = job;
    micro.parallel.micro_batches = 4;
    cases.push_back({"micro-batches", micro, "micro_batches"});
    cases.push_back({"truncated", job, nullptr, 0, 1});
    cases.push_back({"magic", job, nullptr, 0, 2});
    cases.push_back({"empty", job, nullptr, 0, 3});
    for (const Case& c : cases) {
      const auto got = on_ranks(c.target, [&](IShardedOptimizer& opt, RankState& st) {
        opt.optimize(input(1));  // state to protect
        st.params = opt.gather_params();
        st.steps_done = opt.steps_done();
        std::vector<uint8_t> bytes = src[size_t(opt.rank() ^ c.from_rank_xor)].bytes;
        if (c.damage == 1) bytes.resize(bytes.size() / 2);
        if (c.damage == 2) bytes[0] ^= 0x5a;
        if (c.damage == 3) bytes.clear();
        st.error = caught([&] { opt.deserialize(bytes); });
        st.params_after = opt.gather_params();
        st.steps_after = opt.steps_done();
      });
      for (size_t r = 0; r < got.size(); ++r) {
        const auto& [type, msg] = got[r].error;
        const QString where =
            QString("%1 mismatch, rank %2: %3 \"%4\"").arg(c.name).arg(r).arg(qs(type), qs(msg));
        if (r == 0) qDebug("%s", qPrintable(where));
        if (c.says) {
          QVERIFY2(type == "InvalidArgument", qPrintable(where));
          QVERIFY2(contains_ci(msg, c.says), qPrintable(where));
        } else {
          QVERIFY2(type == "FormatError" || type == "InvalidArgument", qPrintable(where));
        }
        QVERIFY2(bit_equal(got[r].params_after, got[r].params), qPrintable(where + " changed"));
        QCOMPARE(got[r].steps_after, got[r].steps_done);
      }
    }
  }

  // synchronize_optimizer_state() at the start and between steps changes nothing.
  void synchronizeKeepsResults_data() { add_layouts(); }

  void synchronizeKeepsResults() {
    const JobSpec job = fetched_job();
    const auto plain = on_ranks(
        job, [&](IShardedOptimizer& opt, RankState& st) { st.result = opt.optimize(input()); });
    const auto synced = on_ranks(job, [&](IShardedOptimizer& opt, RankState& st) {
      opt.synchronize_optimizer_state();
      const TrainResult a = opt.optimize(input(3));
      opt.synchronize_optimizer_state();
      opt.synchronize_optimizer_state();
      st.result = opt.optimize(input());
      opt.synchronize_optimizer_state();
      st.params = opt.gather_params();
      st.losses = a.losses;
      st.losses.insert(st.losses.end(), st.result.losses.begin(), st.result.losses.end());
    });
    for (size_t r = 0; r < plain.size(); ++r) {
      QVERIFY2(synced[r].losses == plain[r].result.losses, qPrintable(QString("rank %1").arg(r)));
      QVERIFY2(bit_equal(synced[r].result.params, plain[r].result.params),
               qPrintable(QString("rank %1 params").arg(r)));
      QVERIFY2(bit_equal(synced[r].params, plain[r].result.params),
               qPrintable(QString("rank %1 gathered params").arg(r)));
    }
  }

  // A replica whose optimizer state disagrees (DDP: another step count is overwritten by the
  // first replica's; ZeRO: refused, naming the step count).
  void synchronizeRepairsOrRefuses() {
    for (const char* s : {"ddp", "zero1"}) {
      const JobSpec job = hybrid_job(s, 2, 1, 2);
      const auto got = on_ranks(job, [&](IShardedOptimizer& opt, RankState& st) {
        opt.optimize(input(2));
        if (opt.topology().coord(opt.rank()).dp == 1) opt.wrapped_optimizer().restore_steps(7);
        st.error = caught([&] { opt.synchronize_optimizer_state(); });
        st.steps_after = opt.wrapped_optimizer().steps();
      });
      for (size_t r = 0; r < got.size(); ++r) {
        const auto& [type, msg] = got[r].error;
        if (std::string(s) == "ddp") {
          QVERIFY2(type.empty(), msg.c_str());
          QCOMPARE(got[r].steps_after, int64_t(2));
        } else {
          QVERIFY2(type == "InvalidArgument" && contains_ci(msg, "step count"), msg.c_str());
        }
      }
    }
  }

  // should_early_stop() is false before any evaluation; a run whose eval loss cannot improve by
  // min_delta stops after `patience` evaluations without gain, exactly when the single-process
  // Trainer does, and the counters travel with serialize()/deserialize().
  void earlyStopping_data() { add_layouts(); }

  void earlyStopping() {
    JobSpec job = fetched_job();
    job.optimizer = optimizer_config("sgd");
    job.optimizer.lr = 1e-7;
    job.train.schedule = {};
    job.train.steps = 40;
    job.train.eval_every = 2;
    job.train.early_stopping.patience = 2;
    job.train.early_stopping.min_delta = 0.5;
    const TrainResult& ref = reference(job);
    QVERIFY(ref.stopped_early);
    QCOMPARE(ref.steps, int64_t(6));  // evaluations at 2 (best), 4 and 6 (no gain): stop

    const auto straight = on_ranks(job, [&](IShardedOptimizer& opt, RankState& st) {
      st.flag = opt.should_early_stop();
      st.result = opt.optimize(input());
      st.flag_after = opt.should_early_stop();
    });
    const auto first = on_ranks(job, [&](IShardedOptimizer& opt, RankState& st) {
      st.result = opt.optimize(input(4));
      st.bytes = opt.serialize();
    });
    const auto resumed = on_ranks(job, [&](IShardedOptimizer& opt, RankState& st) {
      opt.deserialize(first[size_t(opt.rank())].bytes);
      st.flag = opt.should_early_stop();
      st.result = opt.optimize(input());
      st.steps_done = opt.steps_done();
      st.flag_after = opt.should_early_stop();
    });
    for (size_t r = 0; r < straight.size(); ++r) {
      QVERIFY2(!straight[r].flag, "should_early_stop() before training");
      QVERIFY2(straight[r].flag_after, "should_early_stop() after an early-stopped run");
      QVERIFY(straight[r].result.stopped_early);
      QCOMPARE(straight[r].result.steps, ref.steps);
      QCOMPARE(straight[r].result.evals.size(), ref.evals.size());
      QVERIFY(!first[r].result.stopped_early);
      QVERIFY(!resumed[r].flag);
      QVERIFY(resumed[r].result.stopped_early);
      QVERIFY(resumed[r].flag_after);
      QCOMPARE(resumed[r].steps_done, ref.steps);
    }
  }

  // The seed's named types, built from a base optimizer instance and a configuration whose launch
  // fields are left unset (taken from the communicator), hold exactly what the factories build
  // from the job: the same serialize() bytes after the same steps.
  void namedTypesMatchFactories() {
    struct Pair {
      const char* name;
      JobSpec job;
      bool type_sets_strategy;  // the 1-D types: the configuration's strategy is not read
      std::function<std::unique_ptr<IShardedOptimizer>(Communicator&, std::unique_ptr<Optimizer>,
                                                       const ShardedOptions&)>
          make;
    };
    std::vector<Pair> pairs;
    pairs.push_back({"HybridShardedOptimizer 2x1x-1 zero1", hybrid_job("zero1", 2, 1, -1), false,
                     [](Communicator& c, std::unique_ptr<Optimizer> o, const ShardedOptions& s) {
                       return std::make_unique<HybridShardedOptimizer>(c, std::move(o), s);
                     }});
    JobSpec tp = hybrid_job("ddp", 1, 4, 1);
    tp.model.gpt.heads = 4;  // tp must divide the heads
    pairs.push_back({"TensorParallelOptimizer", tp, false,
                     [](Communicator& c, std::unique_ptr<Optimizer> o, const ShardedOptions& s) {
                       return std::make_unique<TensorParallelOptimizer>(c, std::move(o), s);
                     }});
    JobSpec fsdp = gpt_job("fsdp", 4, corpus_vocab());
    fsdp.train.steps = 8;
    pairs.push_back({"FSDPOptimizer", fsdp, true,
                     [](Communicator& c, std::unique_ptr<Optimizer> o, const ShardedOptions& s) {
                       return std::make_unique<FSDPOptimizer>(c, std::move(o), s);
                     }});
    JobSpec zero2 = gpt_job("zero2", 4, corpus_vocab());
    zero2.train.steps = 8;
    pairs.push_back({"ZeRO2Optimizer", zero2, true,
                     [](Communicator& c, std::unique_ptr<Optimizer> o, const ShardedOptions& s) {
                       return std::make_unique<ZeRO2Optimizer>(c, std::move(o), s);
                     }});
    for (const Pair& p : pairs) {
      const auto factory = on_ranks(p.job, [&](IShardedOptimizer& opt, RankState& st) {
        st.result = opt.optimize(input(3));
        st.bytes = opt.serialize();
      });
      const std::vector<RankState> named =
          on_thread_ranks<RankState>(4, [&](Communicator& c, RankState& st) {
            ShardedOptions config = sharded_options(p.job);
            config.sharding.world_size = 1;  // not used: the communicator's are
            config.sharding.backend = "mpi";
            if (p.type_sets_strategy) config.sharding.strategy = "none";
            if (p.job.parallel.tp > 1)
              config.sharding.tp = 1;  // TensorParallelOptimizer: all ranks
            std::unique_ptr<IShardedOptimizer> opt =
                p.make(c, make_optimizer(p.job.optimizer), config);
            st.result = opt->optimize(input(3));
            st.bytes = opt->serialize();
            st.error.second = opt->wrapped_optimizer().name();
          });
      for (size_t r = 0; r < named.size(); ++r) {
        QVERIFY2(named[r].bytes == factory[r].bytes,
                 qPrintable(
                     QString("%1, rank %2: state differs from the factory's").arg(p.name).arg(r)));
        QVERIFY(named[r].result.losses == factory[r].result.losses);
        QCOMPARE(named[r].error.second, p.job.optimizer.name);
      }
    }
    // A custom block list is for the 1-D strategies only.
    std::vector<RankState> refused(4);
    run_threads(4, test_comm_options(), [&](Communicator& c) {
      ShardedOptions config = sharded_options(hybrid_job("ddp", 2, 2, 1));
      config.blocks = [] { return std::vector<std::unique_ptr<Layer>>{}; };
      refused[size_t(c.rank())].error =
          caught([&] { HybridShardedOptimizer(c, make_optimizer(config.optimizer), config); });
    });
    QCOMPARE(refused[0].error.first, std::string("InvalidArgument"));
    QVERIFY2(contains_ci(refused[0].error.second, "model"), refused[0].error.second.c_str());
  }
};

QTEST_GUILESS_MAIN(TestHybridState)
#include "tst_hybrid_state.moc"
