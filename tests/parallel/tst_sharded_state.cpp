// The sharded optimizer's state: serialize/deserialize round trips that resume a run exactly,
// refusal of bytes written by another world size, strategy, rank or model (with nothing changed),
// model files that load on any strategy and world size and are refused when damaged,
// synchronize_optimizer_state, early stopping, evaluation across ranks and configuration errors.
// Ranks run as threads; every assertion runs on the test's thread after the ranks have finished.
#include <QElapsedTimer>
#include <QTemporaryDir>
#include <QtTest>

#include <fstream>

#include "engine/comm/threads/world.h"
#include "engine/run/rank_runner.h"
#include "engine/sharding/sharded_options_from_job.h"
#include "kernels/cpu/gemm.h"
#include "tests/parallel/caught.h"
#include "tests/parallel/parallel_test_util.h"

using namespace shardlab;
using namespace shardlab::ptest;

using shardlab::test::caught;

namespace {

// What one rank saw.
struct RankState {
  std::vector<float> params;        // gather_params() or the result's params
  std::vector<float> params_after;  // a second gather, e.g. after a refused load
  std::vector<double> losses;
  std::vector<uint8_t> bytes;
  int64_t steps_done = -1;
  int64_t steps_after = -1;
  bool flag = false;
  bool flag_after = false;
  EvalResult eval;
  std::vector<std::pair<std::string, std::string>> errors;  // (type, message) per attempt
  TrainResult result;
};

// fn(rank, optimizer, state) on `world` ranks with a freshly created optimizer for `job`.
template <typename F>
std::vector<RankState> on_ranks(const JobSpec& job, F&& fn) {
  return on_thread_ranks<RankState>(static_cast<int>(job.parallel.world_size),
                                    [&](Communicator& c, RankState& st) {
                                      fn(*ShardedOptimizer::create(c, sharded_options(job)), st);
                                    });
}

// The job of these tests: the MLP with Adam, a warm-up cosine schedule (so the step count
// matters), evaluation every 3 steps with a patience that never fires (so early-stopping counters
// are live state), 10 steps over 5 batches per epoch (so a cut lands mid-epoch).
JobSpec state_job(const std::string& strategy, int world) {
  JobSpec job = mlp_job(strategy, world, "adam");
  make_state_live(job);
  return job;
}

bool contains_ci(const std::string& haystack, const char* needle) {
  return QString::fromStdString(haystack).contains(QString(needle), Qt::CaseInsensitive);
}

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

class TestShardedState : public QObject {
  Q_OBJECT

 private:
  Datasets mnist_;
  QTemporaryDir tmp_;
  QElapsedTimer clock_;

  OptimizeInput input(int64_t max_steps = 0) const {
    OptimizeInput in;
    in.train = mnist_.train.get();
    in.eval = mnist_.eval.get();
    in.max_steps = max_steps;
    return in;
  }

  std::string tmp_path(const QString& name) const { return tmp_.filePath(name).toStdString(); }

  // The result of an uninterrupted run of `job`, every rank.
  std::vector<RankState> full_run(const JobSpec& job) {
    return on_ranks(job, [&](ShardedOptimizer& opt, RankState& st) {
      st.result = opt.optimize(input());
      st.steps_done = opt.steps_done();
    });
  }

  // Serialized bytes of every rank after `steps` steps of `job`, with the params then.
  std::vector<RankState> cut_run(const JobSpec& job, int64_t steps) {
    return on_ranks(job, [&](ShardedOptimizer& opt, RankState& st) {
      st.result = opt.optimize(input(steps));
      st.steps_done = opt.steps_done();
      st.bytes = opt.serialize();
      st.params = opt.gather_params();
    });
  }

 private slots:
  void initTestCase() {
    kernels::use_single_blas_thread();
    clock_.start();
    QVERIFY(tmp_.isValid());
    if (!have_fashion_mnist())
      QSKIP("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)");
    mnist_ = load_datasets(mlp_data(), 0);
  }

  void cleanupTestCase() { qInfo("suite ran %.1f s", static_cast<double>(clock_.elapsed()) / 1e3); }

  // serialize() after k steps; fresh optimizers deserialize their own rank's bytes and finish the
  // run: the same parameters, bit for bit, as a run that was never interrupted, and the same
  // losses for the remaining steps.
  void roundTripResumesExactly_data() {
    QTest::addColumn<QString>("strategy");
    QTest::addColumn<int>("world");
    QTest::addColumn<int>("cut");
    for (const char* s : {"ddp", "zero1", "zero2", "fsdp"})
      for (int w : {2, 3}) QTest::addRow("%s/w%d", s, w) << QString(s) << w << (w == 2 ? 4 : 7);
  }

  void roundTripResumesExactly() {
    QFETCH(QString, strategy);
    QFETCH(int, world);
    QFETCH(int, cut);
    const JobSpec job = state_job(strategy.toStdString(), world);
    const std::vector<RankState> full = full_run(job);
    const std::vector<RankState> first = cut_run(job, cut);
    const std::vector<RankState> rest = on_ranks(job, [&](ShardedOptimizer& opt, RankState& st) {
      opt.deserialize(first[static_cast<size_t>(opt.rank())].bytes);
      st.steps_done = opt.steps_done();
      st.params = opt.gather_params();
      st.result = opt.optimize(input());
      st.steps_after = opt.steps_done();
    });
    for (int r = 0; r < world; ++r) {
      const RankState& f = full[size_t(r)];
      const RankState& a = first[size_t(r)];
      const RankState& b = rest[size_t(r)];
      QCOMPARE(f.steps_done, job.train.steps);
      QCOMPARE(a.steps_done, int64_t(cut));
      QVERIFY(!a.bytes.empty());
      // The restored optimizer stands where the first one stopped...
      QCOMPARE(b.steps_done, int64_t(cut));
      QVERIFY2(bit_equal(b.params, a.params),
               qPrintable(QString("rank %1: restored params differ at %2")
                              .arg(r)
                              .arg(first_bit_difference(b.params, a.params))));
      // ...runs only the remaining steps...
      QCOMPARE(b.steps_after, job.train.steps);
      QCOMPARE(static_cast<int64_t>(b.result.losses.size()), job.train.steps - cut);
      // ...with the losses of the uninterrupted run, and ends where it ended.
      std::vector<double> joined = a.result.losses;
      joined.insert(joined.end(), b.result.losses.begin(), b.result.losses.end());
      QVERIFY2(joined == f.result.losses, qPrintable(QString("rank %1: losses differ").arg(r)));
      const int64_t at = first_bit_difference(b.result.params, f.result.params);
      QVERIFY2(at < 0, qPrintable(QString("rank %1: final params differ from the uninterrupted "
                                          "run's at element %2")
                                      .arg(r)
                                      .arg(at)));
    }
  }

  // The early-stopping counters travel with the state: a run cut after k steps and resumed stops
  // at the same step as the uninterrupted run (and as the single-process Trainer).
  void roundTripKeepsEarlyStopping_data() {
    QTest::addColumn<QString>("strategy");
    QTest::addColumn<int>("cut");
    for (const char* s : {"ddp", "zero1", "zero2", "fsdp"})
      for (int cut : {3, 4}) QTest::addRow("%s/w2/cut%d", s, cut) << QString(s) << cut;
  }

  void roundTripKeepsEarlyStopping() {
    QFETCH(QString, strategy);
    QFETCH(int, cut);
    JobSpec job = mlp_job(strategy.toStdString(), 2, "sgd");
    job.optimizer.lr = 1e-7;
    job.train.steps = 40;
    job.train.eval_every = 2;
    job.train.early_stopping.patience = 2;
    job.train.early_stopping.min_delta = 0.5;
    const TrainResult& ref = reference(job);
    QVERIFY(ref.stopped_early);
    QCOMPARE(ref.steps, int64_t(6));  // evaluations at 2 (best), 4 and 6 (no gain): stop

    const std::vector<RankState> first = cut_run(job, cut);
    const std::vector<RankState> rest = on_ranks(job, [&](ShardedOptimizer& opt, RankState& st) {
      opt.deserialize(first[static_cast<size_t>(opt.rank())].bytes);
      st.flag = opt.should_early_stop();
      st.result = opt.optimize(input());
      st.steps_done = opt.steps_done();
      st.flag_after = opt.should_early_stop();
    });
    for (size_t r = 0; r < rest.size(); ++r) {
      QVERIFY(!first[r].result.stopped_early);
      QVERIFY(!rest[r].flag);
      QCOMPARE(rest[r].steps_done, ref.steps);
      QVERIFY(rest[r].result.stopped_early);
      QVERIFY(rest[r].flag_after);
    }
  }

  // Bytes written by another world size, strategy, rank or model, or damaged bytes, are refused
  // with an error naming what differs, and the optimizer is left as it was.
  void deserializeRefusesMismatch_data() {
    QTest::addColumn<QString>("strategy");
    QTest::addColumn<QString>("other");  // another strategy
    QTest::addRow("ddp") << "ddp"
                         << "zero1";
    QTest::addRow("zero1") << "zero1"
                           << "zero2";
    QTest::addRow("zero2") << "zero2"
                           << "fsdp";
    QTest::addRow("fsdp") << "fsdp"
                          << "ddp";
  }

  void deserializeRefusesMismatch() {
    QFETCH(QString, strategy);
    QFETCH(QString, other);
    const std::string s = strategy.toStdString();
    JobSpec job2 = state_job(s, 2);
    job2.train.steps = 10;
    const std::vector<RankState> src = cut_run(job2, 2);  // bytes of world 2, after 2 steps

    enum Case {
      kWorld,
      kStrategy,
      kRank,
      kModel,
      kBuckets,
      kBatch,
      kTruncated,
      kMagic,
      kEmpty,
      kCases
    };
    const char* names[kCases] = {"world size", "strategy",  "rank",  "model",      "bucket cut",
                                 "batch size", "truncated", "magic", "empty bytes"};
    // Each target world trains 1 step first so there is state to protect.
    auto attempt = [&](const JobSpec& target, Case which) {
      return on_ranks(target, [&](ShardedOptimizer& opt, RankState& st) {
        opt.optimize(input(1));
        st.params = opt.gather_params();
        st.steps_done = opt.steps_done();
        const int r = opt.rank();
        std::vector<uint8_t> bytes;
        switch (which) {
          case kWorld:
          case kStrategy:
          case kModel:
            bytes = src[size_t(r % 2)].bytes;
            break;
          case kBuckets:
          case kBatch:
            bytes = src[size_t(r)].bytes;
            break;
          case kRank:
            bytes = src[size_t(1 - r)].bytes;
            break;
          case kTruncated:
            bytes = src[size_t(r)].bytes;
            bytes.resize(bytes.size() / 2);
            break;
          case kMagic:
            bytes = src[size_t(r)].bytes;
            bytes[0] ^= 0x5a;
            break;
          case kEmpty:
          case kCases:
            break;
        }
        st.errors.push_back(caught([&] { opt.deserialize(bytes); }));
        st.params_after = opt.gather_params();
        st.steps_after = opt.steps_done();
      });
    };

    for (int c = 0; c < kCases; ++c) {
      JobSpec target = state_job(s, 2);
      if (c == kWorld) target = state_job(s, 3);
      if (c == kStrategy) target = state_job(other.toStdString(), 2);
      if (c == kModel) target.model.mlp.hidden = {kHidden + 1};
      // A ZeRO rank's shard is its chunk of every bucket, so another cut scrambles the state;
      // DDP holds everything and FSDP cuts per block, so only ZeRO has a bucket cut to check.
      if (c == kBuckets && s != "zero1" && s != "zero2") continue;
      if (c == kBuckets) target.parallel.bucket_mb = 0.01;
      if (c == kBatch) target.train.batch_size *= 2;
      const std::vector<RankState> got = attempt(target, static_cast<Case>(c));
      for (size_t r = 0; r < got.size(); ++r) {
        const auto& [type, msg] = got[r].errors.at(0);
        const QString where =
            QString("%1 mismatch, rank %2: %3 \"%4\"").arg(names[c]).arg(r).arg(qs(type), qs(msg));
        if (r == 0) qDebug("%s", qPrintable(where));
        QVERIFY2(!type.empty(), qPrintable(where + " (nothing thrown)"));
        if (c <= kBatch) {
          QVERIFY2(type == "InvalidArgument", qPrintable(where));
        } else {
          QVERIFY2(type == "InvalidArgument" || type == "FormatError", qPrintable(where));
        }
        if (c == kWorld) QVERIFY2(contains_ci(msg, "world size"), qPrintable(where));
        if (c == kStrategy) QVERIFY2(contains_ci(msg, "strategy"), qPrintable(where));
        if (c == kRank) QVERIFY2(contains_ci(msg, "rank"), qPrintable(where));
        if (c == kBuckets) QVERIFY2(contains_ci(msg, "bucket"), qPrintable(where));
        if (c == kBatch) QVERIFY2(contains_ci(msg, "batch_size"), qPrintable(where));
        // Nothing changed.
        QVERIFY2(bit_equal(got[r].params_after, got[r].params), qPrintable(where + " changed"));
        QCOMPARE(got[r].steps_after, got[r].steps_done);
      }
    }
  }

  // A model file holds the full parameters, so it loads into any strategy on any world size.
  void modelFileLoadsAnywhere_data() {
    QTest::addColumn<QString>("from");
    QTest::addColumn<int>("from_world");
    QTest::addColumn<QString>("to");
    QTest::addColumn<int>("to_world");
    QTest::addRow("zero2/w2->fsdp/w3") << "zero2" << 2 << "fsdp" << 3;
    QTest::addRow("fsdp/w3->ddp/w1") << "fsdp" << 3 << "ddp" << 1;
    QTest::addRow("ddp/w2->zero1/w4") << "ddp" << 2 << "zero1" << 4;
    QTest::addRow("zero1/w3->zero2/w2") << "zero1" << 3 << "zero2" << 2;
    QTest::addRow("fsdp/w2->fsdp/w8") << "fsdp" << 2 << "fsdp" << 8;
    QTest::addRow("zero2/w4->zero2/w4") << "zero2" << 4 << "zero2" << 4;
  }

  void modelFileLoadsAnywhere() {
    QFETCH(QString, from);
    QFETCH(int, from_world);
    QFETCH(QString, to);
    QFETCH(int, to_world);
    const std::string path =
        tmp_path(QString("%1.model")
                     .arg(QString(QTest::currentDataTag()).replace('/', '_').replace('>', '_')));
    const std::vector<RankState> saved = on_ranks(state_job(from.toStdString(), from_world),
                                                  [&](ShardedOptimizer& opt, RankState& st) {
                                                    opt.optimize(input(4));
                                                    st.params = opt.gather_params();
                                                    opt.save_model(path);
                                                  });
    QVERIFY(std::filesystem::exists(path));
    const std::vector<RankState> loaded =
        on_ranks(state_job(to.toStdString(), to_world), [&](ShardedOptimizer& opt, RankState& st) {
          st.params_after = opt.gather_params();  // freshly initialised
          opt.load_model(path);
          st.params = opt.gather_params();
        });
    std::unique_ptr<Model> init = build_model(state_job("ddp", 1).model);
    const std::vector<float> p0(init->params().begin(), init->params().end());
    QVERIFY(!bit_equal(saved[0].params, p0));  // the saved model trained
    for (size_t r = 0; r < loaded.size(); ++r) {
      QVERIFY(bit_equal(loaded[r].params_after, p0));  // fresh optimizers start from the init
      const int64_t at = first_bit_difference(loaded[r].params, saved[0].params);
      QVERIFY2(at < 0, qPrintable(QString("rank %1 differs at %2").arg(r).arg(at)));
    }
    // And the loaded optimizer trains on from there (the loaded params are really in use).
    const std::vector<RankState> trained =
        on_ranks(state_job(to.toStdString(), to_world), [&](ShardedOptimizer& opt, RankState& st) {
          opt.load_model(path);
          st.result = opt.optimize(input(1));
        });
    QVERIFY(rel_diff(trained[0].result.params, saved[0].params) < 0.05);
    QVERIFY(rel_diff(trained[0].result.params, p0) > 0.01);
  }

  // A damaged, truncated, extended, empty, missing or foreign model file is refused with a clear
  // error on every rank, without a crash and without touching the parameters.
  void badModelFilesAreRefused_data() {
    QTest::addColumn<QString>("damage");
    for (const char* d :
         {"truncated by 4", "truncated to half", "one extra float", "empty", "first byte flipped",
          "middle byte flipped", "last byte flipped", "missing", "other model", "directory"})
      QTest::addRow("%s", d) << QString(d);
  }

  void badModelFilesAreRefused() {
    QFETCH(QString, damage);
    const std::string good = tmp_path("good.model");
    if (!std::filesystem::exists(good)) {
      on_ranks(state_job("zero1", 2), [&](ShardedOptimizer& opt, RankState&) {
        opt.optimize(input(2));
        opt.save_model(good);
      });
    }
    std::vector<uint8_t> bytes = read_file(good);
    QVERIFY(bytes.size() > size_t(4 * kMlpParams));
    std::string path = tmp_path("bad_" + damage.simplified().replace(' ', '_') + ".model");
    if (damage == "truncated by 4") bytes.resize(bytes.size() - 4);
    if (damage == "truncated to half") bytes.resize(bytes.size() / 2);
    if (damage == "one extra float") bytes.insert(bytes.end(), {0, 0, 128, 63});
    if (damage == "empty") bytes.clear();
    if (damage == "first byte flipped") bytes[0] ^= 0xff;
    if (damage == "middle byte flipped") bytes[bytes.size() / 2] ^= 0x01;
    if (damage == "last byte flipped") bytes.back() ^= 0x10;
    if (damage == "other model") {
      JobSpec other = state_job("ddp", 1);
      other.model.mlp.hidden = {kHidden + 1};
      on_ranks(other, [&](ShardedOptimizer& opt, RankState&) { opt.save_model(path); });
    } else if (damage == "directory") {
      path = tmp_.path().toStdString();
    } else if (damage != "missing") {
      write_file(path, bytes);
    }

    const std::vector<RankState> got =
        on_ranks(state_job("zero2", 2), [&](ShardedOptimizer& opt, RankState& st) {
          opt.optimize(input(1));
          st.params = opt.gather_params();
          st.errors.push_back(caught([&] { opt.load_model(path); }));
          st.params_after = opt.gather_params();
        });
    for (size_t r = 0; r < got.size(); ++r) {
      const auto& [type, msg] = got[r].errors.at(0);
      const QString where =
          QString("%1, rank %2: %3 \"%4\"").arg(damage).arg(r).arg(qs(type), qs(msg));
      if (r == 0) qDebug("%s", qPrintable(where));
      QVERIFY2(type == "FormatError" || type == "InvalidArgument" || type == "IoError",
               qPrintable(where));
      QVERIFY2(!msg.empty(), qPrintable(where));
      if (damage == "missing") {
        QVERIFY2(type == "IoError", qPrintable(where));
        QVERIFY2(msg.find(path) != std::string::npos, qPrintable(where + " (path not named)"));
      }
      QVERIFY2(bit_equal(got[r].params_after, got[r].params),
               qPrintable(where + " changed params"));
    }
  }

  // synchronize_optimizer_state() at the start and between steps changes nothing.
  void synchronizeKeepsResults_data() {
    QTest::addColumn<QString>("strategy");
    QTest::addColumn<int>("world");
    for (const char* s : {"ddp", "zero1", "zero2", "fsdp"})
      for (int w : {2, 3}) QTest::addRow("%s/w%d", s, w) << QString(s) << w;
  }

  void synchronizeKeepsResults() {
    QFETCH(QString, strategy);
    QFETCH(int, world);
    const JobSpec job = state_job(strategy.toStdString(), world);
    const std::vector<RankState> plain = full_run(job);
    const std::vector<RankState> synced = on_ranks(job, [&](ShardedOptimizer& opt, RankState& st) {
      opt.synchronize_optimizer_state();
      TrainResult a = opt.optimize(input(5));
      opt.synchronize_optimizer_state();
      opt.synchronize_optimizer_state();
      TrainResult b = opt.optimize(input());
      opt.synchronize_optimizer_state();
      st.params = opt.gather_params();
      st.losses = a.losses;
      st.losses.insert(st.losses.end(), b.losses.begin(), b.losses.end());
      st.result = b;
    });
    for (int r = 0; r < world; ++r) {
      QVERIFY2(synced[size_t(r)].losses == plain[size_t(r)].result.losses,
               qPrintable(QString("rank %1 losses").arg(r)));
      QVERIFY2(bit_equal(synced[size_t(r)].result.params, plain[size_t(r)].result.params),
               qPrintable(QString("rank %1 params").arg(r)));
      QVERIFY2(bit_equal(synced[size_t(r)].params, plain[size_t(r)].result.params),
               qPrintable(QString("rank %1 gathered params").arg(r)));
    }
  }

  // should_early_stop() is false before any evaluation; a run whose eval loss cannot improve by
  // min_delta stops after `patience` evaluations without gain, exactly when the single-process
  // Trainer does.
  void earlyStopping_data() {
    QTest::addColumn<QString>("strategy");
    for (const char* s : {"ddp", "zero1", "zero2", "fsdp"}) QTest::addRow("%s/w2", s) << QString(s);
  }

  void earlyStopping() {
    QFETCH(QString, strategy);
    JobSpec job = mlp_job(strategy.toStdString(), 2, "sgd");
    job.optimizer.lr = 1e-7;
    job.train.steps = 40;
    job.train.eval_every = 2;
    job.train.early_stopping.patience = 2;
    job.train.early_stopping.min_delta = 0.5;
    const TrainResult& ref = reference(job);
    QVERIFY(ref.stopped_early);
    QCOMPARE(ref.steps, int64_t(6));

    const std::vector<RankState> got = on_ranks(job, [&](ShardedOptimizer& opt, RankState& st) {
      st.flag = opt.should_early_stop();
      st.result = opt.optimize(input());
      st.flag_after = opt.should_early_stop();
      st.steps_done = opt.steps_done();
    });
    for (size_t r = 0; r < got.size(); ++r) {
      QVERIFY2(!got[r].flag, "should_early_stop() before training");
      QVERIFY2(got[r].flag_after, "should_early_stop() after an early-stopped run");
      QVERIFY(got[r].result.stopped_early);
      QCOMPARE(got[r].result.steps, ref.steps);
      QCOMPARE(got[r].steps_done, ref.steps);
      QCOMPARE(got[r].result.evals.size(), ref.evals.size());
      QVERIFY2(qs(got[r].result.stop_reason).contains("early stop"),
               got[r].result.stop_reason.c_str());
    }
    // And a run that improves does not stop early.
    JobSpec fine = job;
    fine.optimizer.lr = 0.05;
    fine.train.steps = 6;
    fine.train.early_stopping.min_delta = 0.0;
    fine.train.early_stopping.patience = 3;
    const std::vector<RankState> ok = on_ranks(fine, [&](ShardedOptimizer& opt, RankState& st) {
      st.result = opt.optimize(input());
      st.flag_after = opt.should_early_stop();
    });
    QVERIFY(!ok[0].result.stopped_early);
    QVERIFY(!ok[0].flag_after);
    QCOMPARE(ok[0].result.steps, int64_t(6));
  }

  // evaluate(): the same figures on every rank, equal to the single-process Trainer's evaluation
  // of the same parameters.
  void evaluateMatchesTrainer_data() {
    QTest::addColumn<QString>("strategy");
    QTest::addColumn<int>("world");
    QTest::addColumn<int>("samples");
    for (const char* s : {"ddp", "zero1", "zero2", "fsdp"})
      for (int w : {2, 3}) {
        QTest::addRow("%s/w%d/256", s, w) << QString(s) << w << 256;
        QTest::addRow("%s/w%d/all", s, w) << QString(s) << w << 0;
        QTest::addRow("%s/w%d/7", s, w) << QString(s) << w << 7;
      }
  }

  void evaluateMatchesTrainer() {
    QFETCH(QString, strategy);
    QFETCH(int, world);
    QFETCH(int, samples);
    const JobSpec job = state_job(strategy.toStdString(), world);
    const std::vector<RankState> got = on_ranks(job, [&](ShardedOptimizer& opt, RankState& st) {
      opt.optimize(input(3));
      st.eval = opt.evaluate(*mnist_.eval, samples);
      st.params = opt.gather_params();
    });
    std::unique_ptr<Model> model = build_model(job.model);
    std::unique_ptr<Optimizer> base = make_optimizer(job.optimizer);
    QCOMPARE(got[0].params.size(), model->params().size());
    std::copy(got[0].params.begin(), got[0].params.end(), model->params().begin());
    Trainer trainer(*model, *base, *mnist_.train, mnist_.eval.get(), job.train, job.optimizer.lr);
    const EvalResult ref = trainer.evaluate(*mnist_.eval, samples);
    for (size_t r = 0; r < got.size(); ++r) {
      const EvalResult& e = got[r].eval;
      QCOMPARE(e.samples, ref.samples);
      QVERIFY2(std::abs(e.loss - ref.loss) <= 1e-5 * std::abs(ref.loss),
               qPrintable(QString("rank %1: loss %2 vs %3").arg(r).arg(e.loss).arg(ref.loss)));
      QVERIFY2(std::abs(e.accuracy - ref.accuracy) < 1e-9,
               qPrintable(
                   QString("rank %1: accuracy %2 vs %3").arg(r).arg(e.accuracy).arg(ref.accuracy)));
      QCOMPARE(e.loss, got[0].eval.loss);  // the same on every rank
    }
  }

  // step() on every rank's slice of one global batch equals one update of the whole batch by one
  // process (forward, backward and the base optimizer over the full buffer, done here), and
  // returns the global mean loss.
  void stepMatchesOneProcess_data() {
    QTest::addColumn<QString>("strategy");
    QTest::addColumn<QString>("optimizer");
    QTest::addColumn<int>("world");
    for (const QString& s : {QString("ddp"), QString("zero1"), QString("zero2"), QString("fsdp")})
      for (const QString& o : {QString("adam"), QString("sgd")})
        for (int w : {2, 3, 4})
          QTest::addRow("%s/%s/w%d", qPrintable(s), qPrintable(o), w) << s << o << w;
  }

  void stepMatchesOneProcess() {
    QFETCH(QString, strategy);
    QFETCH(QString, optimizer);
    QFETCH(int, world);
    const JobSpec job = mlp_job(strategy.toStdString(), world, optimizer.toStdString());
    const double lr = job.optimizer.lr;
    const int kSteps = 2;  // two steps, so SGD's momentum and Adam's moments are used

    // One process: the first two global batches of the sampler, whole.
    std::unique_ptr<Model> built = build_model(job.model);
    std::unique_ptr<Optimizer> base = make_optimizer(job.optimizer);
    Model& model = *built;
    base->attach({0, model.num_params()});
    SamplerOptions so;
    so.batch_size = job.train.batch_size;
    so.seed = job.train.seed;
    Sampler sampler(mnist_.train->size(), so);
    std::vector<double> ref_losses;
    for (int k = 0; k < kSteps; ++k) {
      Batch b;
      mnist_.train->gather(sampler.next(), b);
      model.zero_grad();
      SoftmaxCrossEntropy loss;
      ref_losses.push_back(loss.forward(model.forward(b.input), b.targets));
      Tensor d;
      loss.backward(d);
      model.backward(d);
      base->step(model.params(), model.grads(), lr);
    }
    const std::vector<float> ref(model.params().begin(), model.params().end());

    const std::vector<RankState> got = on_ranks(job, [&](ShardedOptimizer& opt, RankState& st) {
      SamplerOptions rs = so;
      rs.rank = opt.rank();
      rs.world = opt.world_size();
      Sampler mine(mnist_.train->size(), rs);
      for (int k = 0; k < kSteps; ++k)
        st.losses.push_back(opt.step(*mnist_.train, mine.next(), lr));
      st.params = opt.gather_params();
      st.steps_done = opt.steps_done();
    });
    // The tolerances measured on the same job for kSteps steps (engine/job/equivalence.h).
    JobSpec judged_job = job;
    judged_job.train.steps = kSteps;
    const Judged& judge = judged(judged_job);
    std::string why;
    QVERIFY2(floor_is_consistent(judge.floor, &why), why.c_str());
    for (size_t r = 0; r < got.size(); ++r) {
      QCOMPARE(got[r].steps_done, int64_t(kSteps));
      for (int k = 0; k < kSteps; ++k)
        QVERIFY2(std::abs(got[r].losses[size_t(k)] - ref_losses[size_t(k)]) <=
                     judge.tol.losses * ref_losses[size_t(k)],
                 qPrintable(QString("rank %1 step %2: loss %3 vs %4")
                                .arg(r)
                                .arg(k + 1)
                                .arg(got[r].losses[size_t(k)])
                                .arg(ref_losses[size_t(k)])));
      const double d = max_rel_diff(got[r].params, ref);
      QVERIFY2(
          d <= judge.tol.params,
          qPrintable(
              QString("rank %1: max|a-b|/max|b| = %2 > %3").arg(r).arg(d).arg(judge.tol.params)));
      QVERIFY(bit_equal(got[r].params, got[0].params));
    }
  }

  // Configurations a sharded optimizer cannot run are refused at create() with InvalidArgument
  // naming the field.
  void configurationErrors_data() {
    QTest::addColumn<QString>("what");
    QTest::addColumn<QString>("needle");
    QTest::addRow("batch not divisible by world*accumulation") << "accumulation"
                                                               << "batch";
    QTest::addRow("batch not divisible by world") << "batch"
                                                  << "batch";
    QTest::addRow("unknown strategy") << "zero3"
                                      << "strategy";
    QTest::addRow("strategy none") << "none"
                                   << "strategy";
    QTest::addRow("fsdp_keep_params on zero1") << "keep"
                                               << "fsdp_keep_params";
    QTest::addRow("bucket_mb 0") << "bucket0"
                                 << "bucket_mb";
    QTest::addRow("world_size differs from the communicator") << "world"
                                                              << "world";
  }

  void configurationErrors() {
    QFETCH(QString, what);
    QFETCH(QString, needle);
    JobSpec job = mlp_job("zero1", 2, "adam");
    int ranks = 2;
    if (what == "accumulation") {
      job = mlp_job("zero2", 8, "adam");
      job.train.accumulation_steps = 2;  // 24 / (8 * 2) is not whole
      ranks = 8;
    }
    if (what == "batch") {
      job = mlp_job("ddp", 3, "adam");
      job.train.batch_size = 25;
      ranks = 3;
    }
    if (what == "zero3") job.parallel.strategy = "zero3";
    if (what == "none") job.parallel.strategy = "none";
    if (what == "keep") job.parallel.fsdp_keep_params = true;
    if (what == "bucket0") job.parallel.bucket_mb = 0;
    if (what == "world") job.parallel.world_size = 4;  // on 2 ranks

    std::vector<std::pair<std::string, std::string>> errors(static_cast<size_t>(ranks));
    const auto outer = caught([&] {
      run_threads(ranks, test_comm_options(), [&](Communicator& c) {
        errors[size_t(c.rank())] = caught([&] {
          std::unique_ptr<ShardedOptimizer> opt = ShardedOptimizer::create(c, sharded_options(job));
          opt->optimize(input(1));
        });
      });
    });
    QVERIFY2(outer.first.empty(), qPrintable(qs(outer.first + ": " + outer.second)));
    for (size_t r = 0; r < errors.size(); ++r) {
      const auto& [type, msg] = errors[r];
      const QString where = QString("rank %1: %2 \"%3\"").arg(r).arg(qs(type), qs(msg));
      if (r == 0) qDebug("%s", qPrintable(where));
      QVERIFY2(type == "InvalidArgument", qPrintable(where));
      QVERIFY2(contains_ci(msg, needle.toUtf8().constData()), qPrintable(where));
    }
  }
};

QTEST_GUILESS_MAIN(TestShardedState)
#include "tst_sharded_state.moc"
