// Sharded checkpoints wired into training (RankRunOptions::resume_from, train.checkpoint_dir):
// for ddp, zero1, zero2 and fsdp on 4 thread ranks (the Fashion-MNIST MLP) and a pp 2 x tp 2 x
// dp 2 GPT (2 micro-batches), a run of 8 steps saving every 3 steps, and a second run resumed
// from its step-6 checkpoint, end with bit-identical parameters, and steps 7 and 8 have the same
// losses. A run stopped by the user saves where it stopped and resumes from there;
// keep_checkpoints prunes; a checkpoint of another model, optimizer or global batch is refused
// naming the difference; a damaged shard or manifest fails every rank naming the file before any
// step.
#include <QTemporaryDir>
#include <QtTest>

#include <filesystem>
#include <fstream>

#include "engine/checkpoint/checkpoint_store.h"
#include "engine/job/build.h"
#include "engine/plan/memory/planner.h"
#include "engine/run/rank_runner.h"
#include "engine/train/stop_request.h"
#include "tests/common/caught.h"
#include "tests/parallel/parallel_test_util.h"

using namespace shardlab;
using namespace shardlab::ptest;
using shardlab::test::caught;

namespace fs = std::filesystem;

namespace {

constexpr int64_t kSteps = 8;

// The MLP with Adam, a warm-up cosine schedule (the step count matters) and evaluations every 3
// steps with a patience that never fires (live early-stopping state), 8 steps over 5 batches per
// epoch (the resume lands mid-epoch), checkpoints every 3 steps.
JobSpec mlp_ckpt_job(const std::string& strategy, int world, const std::string& dir) {
  JobSpec j = mlp_job(strategy, world, "adam");
  j.train.steps = kSteps;
  j.train.log_every = 100;
  make_state_live(j);
  j.train.checkpoint_dir = dir;
  j.train.checkpoint_every = 3;
  return j;
}

// pp 2 x tp 2 x dp 2, ZeRO-1 over dp, 1F1B over 2 micro-batches, on the tiny GPT.
JobSpec hybrid_ckpt_job(const std::string& dir) {
  JobSpec j = gpt_job("zero1", 8, corpus_vocab());
  j.train.steps = kSteps;
  j.train.batch_size = 8;
  j.train.log_every = 100;
  j.train.eval_every = 3;
  set_grid(j, {.pp = 2, .tp = 2, .dp = 2, .micro_batches = 2, .schedule = "1f1b"});
  j.train.checkpoint_dir = dir;
  j.train.checkpoint_every = 3;
  return j;
}

struct Run {
  ParallelRunResult result;
  std::vector<int64_t> saved;  // steps rank 0 reported saved
  int64_t steps_seen = 0;      // on_step calls on rank 0
};

Run run_job(const JobSpec& job, const std::string& resume_from = {}, StopRequest* stop = nullptr) {
  Run out;
  RankRunOptions o;
  o.stop = stop;
  o.resume_from = resume_from;
  o.on_checkpoint = [&out](const std::string&, int64_t step) { out.saved.push_back(step); };
  o.callbacks.on_step = [&out, stop](const StepInfo& i) {
    ++out.steps_seen;
    if (stop && i.step == 4) stop->request();  // the user stops the run after step 4 or 5
  };
  out.result = run_threads_job(job, data_of(job), o);
  return out;
}

std::vector<std::string> step_dirs(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory()) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

void flip_byte(const std::string& path, std::streamoff at) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(at);
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x20);
  f.seekp(at);
  f.write(&c, 1);
}

QString q(const std::string& s) {
  return QString::fromStdString(s);
}

}  // namespace

class TestCheckpointResume : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir tmp_;
  // The strategies' full runs and their checkpoint directories, for the failure tests.
  std::map<std::string, std::string> dirs_;
  std::map<std::string, std::vector<float>> params_;  // their final parameters

  std::string path(const QString& name) const { return tmp_.filePath(name).toStdString(); }

  static JobSpec job_for(const QString& kind, const std::string& dir) {
    return kind == "hybrid" ? hybrid_ckpt_job(dir) : mlp_ckpt_job(kind.toStdString(), 4, dir);
  }

 private slots:
  void initTestCase() { QVERIFY(tmp_.isValid()); }

  void resumeIsExact_data() {
    QTest::addColumn<QString>("kind");
    for (const char* k : {"ddp", "zero1", "zero2", "fsdp", "hybrid"})
      QTest::newRow(k) << QString(k);
  }

  void resumeIsExact() {
    QFETCH(QString, kind);
    if (kind != "hybrid" && !have_fashion_mnist()) QSKIP(kNoFashionMnist);
    const std::string dir_a = path("a-" + kind), dir_b = path("b-" + kind);
    const JobSpec a_job = job_for(kind, dir_a);
    const Run a = run_job(a_job);
    const TrainResult& ra = a.result.result;
    QCOMPARE(ra.steps, kSteps);
    QCOMPARE(ra.params.size(), size_t(model_layout(a_job.model).size()));
    QCOMPARE(a.saved, (std::vector<int64_t>{3, 6, 8}));  // every 3 steps and the last
    QCOMPARE(step_dirs(dir_a),
             (std::vector<std::string>{"step-00000003", "step-00000006", "step-00000008"}));
    QCOMPARE(find_checkpoint(dir_a), step_dir(dir_a, 8));
    const CheckpointManifest m = read_manifest(step_dir(dir_a, 6));
    QCOMPARE(m.step, int64_t(6));
    QCOMPARE(q(m.strategy), q(a_job.parallel.strategy));
    QCOMPARE(m.world_size, static_cast<int>(a_job.parallel.world_size));
    QCOMPARE(static_cast<int>(m.shards.size()), m.world_size);
    dirs_[kind.toStdString()] = dir_a;
    params_[kind.toStdString()] = ra.params;

    // A new run resumed from the mid-run checkpoint (not the latest) continues to step 8.
    const Run b = run_job(job_for(kind, dir_b), step_dir(dir_a, 6));
    const TrainResult& rb = b.result.result;
    QCOMPARE(rb.steps, kSteps);
    QCOMPARE(b.steps_seen, kSteps - 6);
    QCOMPARE(rb.losses.size(), size_t(kSteps - 6));
    for (size_t i = 0; i < rb.losses.size(); ++i)
      QVERIFY2(rb.losses[i] == ra.losses[6 + i],
               qPrintable(QString("step %1: loss %2 after resume, %3 straight")
                              .arg(7 + i)
                              .arg(rb.losses[i], 0, 'g', 17)
                              .arg(ra.losses[6 + i], 0, 'g', 17)));
    QVERIFY2(bit_equal(rb.params, ra.params),
             qPrintable(QString("parameters differ first at %1")
                            .arg(first_bit_difference(rb.params, ra.params))));
    QVERIFY(!ra.evals.empty() && !rb.evals.empty());
    QCOMPARE(rb.evals.back().loss, ra.evals.back().loss);
    QCOMPARE(b.saved, (std::vector<int64_t>{8}));
  }

  void keepCheckpointsPrunes() {
    if (!have_fashion_mnist()) QSKIP(kNoFashionMnist);
    const std::string dir = path("keep");
    JobSpec job = mlp_ckpt_job("zero2", 4, dir);
    job.train.eval_every = 0;
    job.train.early_stopping.patience = 0;
    job.train.checkpoint_every = 2;
    job.train.keep_checkpoints = 2;
    const Run r = run_job(job);
    QCOMPARE(r.saved, (std::vector<int64_t>{2, 4, 6, 8}));
    QCOMPARE(step_dirs(dir), (std::vector<std::string>{"step-00000006", "step-00000008"}));
    verify(dir);
  }

  // A run stopped at the user's request saves where it stopped (checkpoint_every 0: only there);
  // resumed from there it ends as the uninterrupted run.
  void userStopSavesAndResumes() {
    if (!dirs_.count("zero2")) QSKIP("needs resumeIsExact(zero2)");
    const std::string dir = path("stopped");
    JobSpec job = mlp_ckpt_job("zero2", 4, dir);
    job.train.checkpoint_every = 0;
    StopRequest stop;
    const Run r = run_job(job, {}, &stop);
    QVERIFY(stop.requested());
    const int64_t at = stop.stop_at();
    QVERIFY2(at >= 4 && at < kSteps, qPrintable(QString("stopped after %1").arg(at)));
    QCOMPARE(r.result.result.steps, at);
    QCOMPARE(r.saved, (std::vector<int64_t>{at}));
    QCOMPARE(find_checkpoint(dir), step_dir(dir, at));
    const Run b = run_job(job, dir);
    QCOMPARE(b.steps_seen, kSteps - at);
    QVERIFY2(bit_equal(b.result.result.params, params_["zero2"]),
             "stopped and resumed differs from the uninterrupted run");
    QCOMPARE(b.saved, (std::vector<int64_t>{kSteps}));
  }

  // Another strategy or world size loads (resharding: tst_resharding); another model, optimizer
  // or global batch is refused naming what differs.
  void otherModelIsRefused_data() {
    QTest::addColumn<QString>("change");
    QTest::addColumn<QString>("difference");
    QTest::newRow("optimizer") << "sgd"
                               << "model layout optimizer: checkpoint \"adam\", this job \"sgd\"";
    QTest::newRow("batch size") << "batch"
                                << "model layout batch_size: checkpoint 24, this job 48";
    QTest::newRow("model") << "hidden"
                           << "model layout params: checkpoint";
  }

  void otherModelIsRefused() {
    QFETCH(QString, change);
    QFETCH(QString, difference);
    if (!dirs_.count("zero2")) QSKIP("needs resumeIsExact(zero2)");
    JobSpec job = mlp_ckpt_job("zero2", 4, path("other"));
    if (change == "sgd") {
      job.optimizer = optimizer_config("sgd");
    } else if (change == "batch") {
      job.train.batch_size = 48;
    } else {
      job.model.mlp.hidden.back() += 4;
    }
    Run r;
    const auto [type, what] = caught([&] { r = run_job(job, dirs_["zero2"]); });
    QCOMPARE(q(type), QString("InvalidArgument"));
    QVERIFY2(q(what).contains(difference), qPrintable(q(what)));
    QVERIFY2(q(what).contains("cannot resume this job from it"), qPrintable(q(what)));
    QVERIFY2(q(what).contains(q(step_dir(dirs_["zero2"], 8))), qPrintable(q(what)));
  }

  void damagedCheckpointFailsBeforeTraining_data() {
    QTest::addColumn<QString>("damage");
    QTest::addColumn<QString>("file");     // the file the message must name
    QTest::addColumn<QString>("problem");  // and what it must say
    QTest::newRow("flipped header byte") << "flip"
                                         << "shard-00002.bin"
                                         << "checksum mismatch in the header";
    QTest::newRow("flipped data byte") << "flip-data"
                                       << "shard-00001.bin"
                                       << "checksum mismatch in tensor";
    QTest::newRow("truncated shard") << "truncate"
                                     << "shard-00001.bin"
                                     << "truncated";
    QTest::newRow("missing shard") << "remove"
                                   << "shard-00003.bin"
                                   << "missing shard for rank 3";
    QTest::newRow("missing manifest") << "nomanifest"
                                      << "damaged-nomanifest"
                                      << "no manifest.json";
    QTest::newRow("bad manifest") << "manifest"
                                  << "manifest.json"
                                  << "manifest.json";
  }

  void damagedCheckpointFailsBeforeTraining() {
    QFETCH(QString, damage);
    QFETCH(QString, file);
    QFETCH(QString, problem);
    if (!dirs_.count("zero2")) QSKIP("needs resumeIsExact(zero2)");
    const std::string copy = path("damaged-" + damage);
    fs::copy(step_dir(dirs_["zero2"], 6), copy, fs::copy_options::recursive);
    const std::string target = copy + "/" + file.toStdString();
    if (damage == "flip") {
      flip_byte(target, 100);
    } else if (damage == "flip-data") {
      flip_byte(target, static_cast<std::streamoff>(fs::file_size(target)) - 100);
    } else if (damage == "truncate") {
      fs::resize_file(target, fs::file_size(target) / 2);
    } else if (damage == "remove") {
      fs::remove(target);
    } else if (damage == "nomanifest") {
      fs::remove(copy + "/manifest.json");
    } else {
      std::ofstream(target, std::ios::trunc) << R"({"format_version": 1, "step": "six"})";
    }
    Run r;
    const auto [type, what] =
        caught([&] { r = run_job(mlp_ckpt_job("zero2", 4, path("never")), copy); });
    QVERIFY2(type == "FormatError" || type == "IoError", qPrintable(q(type) + ": " + q(what)));
    QVERIFY2(q(what).contains(file) && q(what).contains(problem), qPrintable(q(what)));
    QCOMPARE(r.steps_seen, int64_t(0));
    QVERIFY(!fs::exists(path("never")));
  }
};

QTEST_GUILESS_MAIN(TestCheckpointResume)
#include "tst_checkpoint_resume.moc"
