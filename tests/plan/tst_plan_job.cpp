// `shardlab plan --job` on this machine: each rank's memory equal to what the running engine's
// ledger holds (`shardlab run --json`), the kernel list counting the models' FLOPs (against the
// textbook counts, not the code's), the GEMM grid's interpolation, a calibration file read back,
// the step's parts adding up, and bad input one line naming the problem. The predicted step time
// against measured runs is a benchmark: tests/bench/plan_vs_run.py.
//
// Runs alone (RUN_SERIAL): the calibration times the cores.
#include <QtTest>

#include <QDateTime>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QStandardPaths>
#include <QSysInfo>
#include <QTemporaryDir>

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/job/job_spec.h"
#include "engine/plan/cpu_ops.h"
#include "engine/plan/job/job_work.h"
#include "engine/plan/layout_as_job.h"
#include "engine/plan/search.h"
#include "tests/common/data.h"
#include "tests/common/process.h"
#include "tests/common/refusal.h"

using shardlab::plan::CpuOpCosts;
using shardlab::test::ProcessOptions;
using shardlab::test::ProcessOutcome;
using shardlab::test::run_process;

namespace {

ProcessOutcome cli(const QStringList& args, int timeout_ms = 120000) {
  ProcessOptions o;
  o.timeout_ms = timeout_ms;
  return run_process(SHARDLAB_CLI, args, o);
}

QJsonObject json_of(const QString& text) {
  return QJsonDocument::fromJson(text.toUtf8()).object();
}

// One line on stderr naming `what`, no crash, a non-zero exit.
void expect_error(const QStringList& args, const QString& what) {
  shardlab::test::expect_refusal(cli(args), args.join(' '), what);
}

// A grid where every GEMM runs at 1 GFLOP/s and nothing else costs anything: work in seconds is
// then FLOPs / 1e9.
CpuOpCosts flop_counter() {
  CpuOpCosts c;
  c.gemm_sizes = {1, int64_t{1} << 24};
  c.gemm_gflops.assign(8, 1.0);
  return c;
}

}  // namespace

class TestPlanJob : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;
  QString cluster_;  // this machine, calibrated once

  QString job(const char* file) const {
    return QString::fromStdString(shardlab::test::example_job(file));
  }

 private slots:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    cluster_ = dir_.filePath("here.json");
    const ProcessOutcome o = cli({"plan", "--calibrate", "--out", cluster_});
    QVERIFY2(o.exit_code == 0, qPrintable(o.err));
    qInfo("%s on %s: %s", qPrintable(QDateTime::currentDateTimeUtc().toString(Qt::ISODate)),
          qPrintable(QSysInfo::machineHostName()), qPrintable(o.err.trimmed()));
  }

  void gemmInterpolation() {
    CpuOpCosts c;
    c.gemm_sizes = {16, 64};
    c.gemm_gflops.assign(8, 10.0);
    c.gemm_gflops[7] = 20.0;  // (64, 64, 64)
    const auto t = [](double m, double n, double k, double gflops) {
      return 2 * m * n * k / (gflops * 1e9);
    };
    QCOMPARE(c.gemm_seconds(16, 16, 16), t(16, 16, 16, 10));
    QCOMPARE(c.gemm_seconds(64, 64, 64), t(64, 64, 64, 20));
    // Halfway in log2 on each axis: the rate is the corners' mean, 10 + 10/8.
    QVERIFY(std::abs(c.gemm_seconds(32, 32, 32) / t(32, 32, 32, 11.25) - 1) < 1e-12);
    // Outside the grid: the nearest edge's rate.
    QVERIFY(std::abs(c.gemm_seconds(4096, 4096, 4096) / t(4096, 4096, 4096, 20) - 1) < 1e-12);
    QVERIFY(std::abs(c.gemm_seconds(2, 2, 2) / t(2, 2, 2, 10) - 1) < 1e-12);
    QCOMPARE(c.gemm_seconds(0, 16, 16), 0.0);
  }

  // The kernel list of job_work.cpp against the models' FLOPs counted by hand: a Linear's
  // forward, weight gradient and input gradient are each 2 x rows x in x out (the first MLP layer
  // skips the input gradient); attention per sequence and head forward 2 x 2 T^2 d (scores and
  // their product with V), backward twice that.
  void workCountsTheModelsFlops() {
    const CpuOpCosts c = flop_counter();
    shardlab::MlpConfig m;
    m.input_dim = 784, m.hidden = {256, 128}, m.num_classes = 10;
    const double rows = 64;
    const double pairs = 784.0 * 256 + 256.0 * 128 + 128.0 * 10;
    const double mlp = 2 * rows * (3 * pairs - 784.0 * 256);
    const shardlab::plan::Work w = shardlab::plan::mlp_work(m, 64, c);
    QVERIFY2(std::abs(w.gemm * 1e9 / mlp - 1) < 1e-12, qPrintable(QString::number(w.gemm * 1e9)));
    QCOMPARE(w.other, 0.0);

    shardlab::GptConfig g;
    g.vocab_size = 114, g.context = 64, g.width = 64, g.layers = 2, g.heads = 4, g.mlp_ratio = 4;
    const double B = 32, T = 64, C = 64, F = 256, V = 114, d = 16, H = 4, L = 2;
    const double per_layer =
        6 * B * T * (3 * C * C + C * C + 2 * C * F) + 6 * 2 * B * H * T * T * d;
    const double gpt = L * per_layer + 6 * B * T * C * V;
    const shardlab::plan::Work full = shardlab::plan::gpt_work(g, 0, g.layers + 2, 32, 1, c);
    QVERIFY2(std::abs(full.gemm * 1e9 / gpt - 1) < 1e-12, qPrintable(QString::number(full.gemm)));
    // Tensor parallel 2: every block's work halves, the head's vocabulary splits 57 + 57.
    const shardlab::plan::Work half = shardlab::plan::gpt_work(g, 0, g.layers + 2, 32, 2, c);
    QVERIFY(std::abs(half.gemm * 2 / full.gemm - 1) < 1e-12);
    // Stages: the blocks of two stages add up to the whole.
    const double split = shardlab::plan::gpt_work(g, 0, 2, 32, 1, c).gemm +
                         shardlab::plan::gpt_work(g, 2, 4, 32, 1, c).gemm;
    QVERIFY(std::abs(split / full.gemm - 1) < 1e-12);
  }

  void calibrationFileReadsBack() {
    QFile f(cluster_);
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QJsonObject doc = QJsonDocument::fromJson(f.readAll()).object();
    const QJsonObject ops = doc["cpu_ops"].toObject();
    const QJsonArray rates = ops["gemm"].toObject()["gflops"].toArray();
    QCOMPARE(rates.size(), 64);  // 4 sizes cubed
    for (const QJsonValue& r : rates) QVERIFY(r.toDouble() > 0);
    const QJsonObject ns = ops["ns_per_element"].toObject();
    for (int i = 0; i < static_cast<int>(shardlab::plan::CpuOp::count); ++i) {
      const char* name = shardlab::plan::cpu_op_name(static_cast<shardlab::plan::CpuOp>(i));
      QVERIFY2(ns.contains(name) && ns[name].toDouble() > 0, name);
    }
    QCOMPARE(ops["sync"].toArray().size(), 3);  // 1, 2 and 4 ranks per core
    // The file drives --job as it is, and a planner's print of it keeps the measured block.
    const ProcessOutcome o = cli({"plan", "--job", job("gpt-3d.json"), "--cluster", cluster_});
    QVERIFY2(o.exit_code == 0, qPrintable(o.err));
    QVERIFY2(o.out.contains("step ") && o.out.contains("rank 7:"), qPrintable(o.out));
  }

  // Each rank's parameters, gradients and optimizer state: the prediction against the ledger of
  // the running engine (`shardlab run --json` ranks, measured after the last step).
  void memoryEqualsTheLedger_data() {
    QTest::addColumn<QString>("file");
    QTest::addColumn<QStringList>("sets");
    QTest::addColumn<bool>("fashion");
    QTest::newRow("gpt-3d") << job("gpt-3d.json") << QStringList{} << false;
    QTest::newRow("gpt-3d zero2 pp1")
        << job("gpt-3d.json")
        << QStringList{"parallel.strategy=zero2", "parallel.pp=1", "parallel.dp=4"} << false;
    QTest::newRow("fashion_mlp zero2") << job("fashion_mlp.json") << QStringList{} << true;
    QTest::newRow("fashion_mlp fsdp")
        << job("fashion_mlp_fsdp_mpi.json") << QStringList{"parallel.backend=threads"} << true;
  }
  void memoryEqualsTheLedger() {
    QFETCH(QString, file);
    QFETCH(QStringList, sets);
    QFETCH(bool, fashion);
    if (fashion && !shardlab::test::have_fashion_mnist()) QSKIP(shardlab::test::kNoFashionMnist);
    QStringList setargs;
    for (const QString& s : sets) setargs << "--set" << s;
    const ProcessOutcome p =
        cli(QStringList{"plan", "--job", file, "--cluster", cluster_, "--json"} + setargs);
    QVERIFY2(p.exit_code == 0, qPrintable(p.err));
    const ProcessOutcome r =
        cli(QStringList{"run", file, "--no-record", "--quiet", "--json", "--set", "train.steps=2",
                        "--set", "train.eval_every=0"} +
            setargs);
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    const QJsonArray planned = json_of(p.out)["memory_bytes_by_rank"].toArray();
    const QJsonArray ranks = json_of(r.out)["ranks"].toArray();
    QVERIFY(!ranks.isEmpty());
    QCOMPARE(planned.size(), ranks.size());
    for (int i = 0; i < ranks.size(); ++i) {
      const QJsonObject want = ranks[i].toObject(), got = planned[i].toObject();
      QCOMPARE(got["params"].toInteger(), want["params_bytes"].toInteger());
      QCOMPARE(got["grads"].toInteger(), want["grads_bytes"].toInteger());
      QCOMPARE(got["optimizer_state"].toInteger(), want["optimizer_state_bytes"].toInteger());
    }
  }

  // The step time predicted from a fresh calibration: positive, its parts adding up to it, the
  // cores named as the bound when 8 ranks share fewer cores. Its accuracy against `shardlab run`
  // is measured by tests/bench/plan_vs_run.py (a benchmark, not a timed test: on a shared 2-core
  // machine the same job's median step moves by tens of percent from one minute to the next).
  void stepTimeParts() {
    const ProcessOutcome p =
        cli({"plan", "--job", job("gpt-3d.json"), "--cluster", cluster_, "--json"});
    QVERIFY2(p.exit_code == 0, qPrintable(p.err));
    const QJsonObject e = json_of(p.out);
    const double step = e["step_seconds"].toDouble();
    QVERIFY(step > 0);
    double sum = 0;
    for (const QJsonValue v : e["time_seconds"].toObject()) sum += v.toDouble();
    QVERIFY2(std::abs(sum / step - 1) < 1e-9, qPrintable(QString::number(sum / step)));
    QCOMPARE(e["ranks"].toInt(), 8);
    QVERIFY(step >=
            std::max(e["critical_path_seconds"].toDouble(), e["cores_bound_seconds"].toDouble()) *
                (1 - 1e-12));
    if (e["cores"].toInt() < 8) QCOMPARE(e["bound_by"].toString(), QString("cores"));
    QVERIFY(!e["why"].toString().isEmpty() && !e["left_out"].toString().isEmpty());
  }

  // A large plan's layouts as jobs this machine runs (the app's "Open as job"): every one of the
  // 175B search's top 40 validates and keeps each parallel dimension that was parallel; the best
  // one trains 3 steps with `shardlab run`.
  void everyLayoutIsARunnableJob() {
    shardlab::plan::PlanJob big;
    big.model = shardlab::plan::GptShape{96, 12288, 96, 0, 2048, 51200};
    big.gpus = 1024;
    big.global_batch = 1536;
    shardlab::plan::SearchOptions o;
    o.top = 40;
    const shardlab::plan::PlanResult r =
        shardlab::plan::search_plans(big, shardlab::plan::cluster_preset("a100-80gb"), o);
    QVERIFY(r.plans.size() >= 10);
    for (const shardlab::plan::Estimate& e : r.plans) {
      const shardlab::plan::LayoutAsJob j =
          shardlab::plan::layout_as_job(e.layout, e.micro_batches);
      const shardlab::JobSpec job = shardlab::job_from_json(j.job);  // throws when invalid
      QVERIFY(shardlab::validate(job).empty());
      const shardlab::ParallelConfig& p = job.parallel;
      QCOMPARE(p.pp, std::min<int64_t>(e.layout.pp, 2));
      QCOMPARE(p.tp, std::min<int64_t>(e.layout.tp, 2));
      QCOMPARE(p.world_size, p.pp * p.tp * std::min<int64_t>(e.layout.dp, 2));
      QVERIFY(p.world_size <= 8);
      if (e.layout.recompute != shardlab::plan::Recompute::none) QVERIFY(!j.changes.empty());
    }
    const shardlab::plan::Estimate& best = r.plans.front();
    const QString file = dir_.filePath("best.json");
    shardlab::save_job(
        shardlab::job_from_json(shardlab::plan::layout_as_job(best.layout, best.micro_batches).job),
        file.toStdString());
    const ProcessOutcome o2 = cli({"run", file, "--no-record", "--quiet", "--json", "--set",
                                   "train.steps=3", "--set", "train.eval_every=0"});
    QVERIFY2(o2.exit_code == 0, qPrintable(o2.err));
    QCOMPARE(json_of(o2.out)["steps"].toInt(), 3);
  }

  // --calibrate --links: the links `shardlab doctor --cluster --json` measured become the cluster's
  // links between nodes, the median pair (written here as the doctor documents its output: three
  // hosts, pairs of 2, 3 and 4 GB/s at 10, 20 and 30 us), and a real doctor run's file reads too.
  void linksFromTheDoctor() {
    const QString doctor = dir_.filePath("doctor.json");
    QFile f(doctor);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(R"({"command": "doctor --cluster", "seconds": 3.1,
      "hosts": [{"rank": 0, "host": "h0"}, {"rank": 1, "host": "h1"}, {"rank": 2, "host": "h2"}],
      "pairs": [{"a": 0, "b": 1, "gb_per_second": 2.0, "latency_us": 30},
                {"a": 0, "b": 2, "gb_per_second": 4.0, "latency_us": 10},
                {"a": 1, "b": 2, "gb_per_second": 3.0, "latency_us": 20}],
      "findings": [], "named": [], "notes": []})");
    f.close();
    const QString out = dir_.filePath("linked.json");
    const ProcessOutcome o = cli({"plan", "--calibrate", "--links", doctor, "--out", out});
    QVERIFY2(o.exit_code == 0, qPrintable(o.err));
    QVERIFY2(o.err.contains("between nodes: 3.00 GB/s, 20.0 us (the median of 3 pairs"),
             qPrintable(o.err));
    QFile c(out);
    QVERIFY(c.open(QIODevice::ReadOnly));
    const QJsonObject doc = QJsonDocument::fromJson(c.readAll()).object();
    QCOMPARE(doc["inter_node"].toObject()["busbw_gb_per_second"].toDouble(), 3.0);
    QCOMPARE(doc["inter_node"].toObject()["latency_us"].toDouble(), 20.0);
    QVERIFY(doc["intra_node"].toObject()["busbw_gb_per_second"].toDouble() != 3.0);
    QCOMPARE(doc["measured"].toObject()["links"].toObject()["pairs"].toInt(), 3);

    if (!SHARDLAB_HAVE_MPI) QSKIP("this shardlab was built without MPI: no real doctor run");
    const QString mpirun = QStandardPaths::findExecutable("mpirun");
    if (mpirun.isEmpty()) QSKIP("mpirun not found (apt-get install openmpi-bin)");
    ProcessOptions po;
    po.timeout_ms = 120000;
    po.env.insert("OMPI_ALLOW_RUN_AS_ROOT", "1");  // containers and CI run as root
    po.env.insert("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    const ProcessOutcome d = run_process(
        mpirun, {"-np", "2", "--oversubscribe", SHARDLAB_CLI, "doctor", "--cluster", "--json"}, po);
    QVERIFY2(d.finished && d.out.contains("\"pairs\""), qPrintable(d.out + d.err));
    const QString real = dir_.filePath("real-doctor.json");
    QFile rf(real);
    QVERIFY(rf.open(QIODevice::WriteOnly));
    rf.write(d.out.toUtf8());
    rf.close();
    const ProcessOutcome o2 = cli({"plan", "--calibrate", "--links", real, "--out", out});
    QVERIFY2(o2.exit_code == 0, qPrintable(o2.err));
    // Both ranks on this machine: the doctor's note that these are not the network is repeated.
    QVERIFY2(o2.err.contains("between nodes: ") && o2.err.contains("not the network"),
             qPrintable(o2.err));
  }

  void badInput() {
    const QString gpt = job("gpt-3d.json");
    expect_error({"plan", "--job", gpt}, "needs --cluster FILE");
    expect_error({"plan", "--job", gpt, "--cluster", cluster_, "--tp", "2"}, "--tp does not apply");
    expect_error({"plan", "--job", dir_.filePath("missing.json"), "--cluster", cluster_},
                 "missing.json");
    expect_error({"plan", "--set", "train.steps=3", "--gpu", "a100-80gb"}, "--set goes with --job");
    expect_error({"plan", "--links", cluster_, "--gpu", "a100-80gb"},
                 "--links goes with --calibrate");
    // A file that is not the doctor's output (this calibration file), before anything is measured
    // into --out.
    expect_error({"plan", "--calibrate", "--links", cluster_}, "not the output of shardlab doctor");
    // A GPU cluster file has no measured CPU costs.
    const QString preset = dir_.filePath("a100.json");
    const ProcessOutcome o = cli({"plan", "--print-cluster", "--gpu", "a100-80gb"});
    QVERIFY2(o.exit_code == 0, qPrintable(o.err));
    QFile pf(preset);
    QVERIFY(pf.open(QIODevice::WriteOnly));
    pf.write(o.out.toUtf8());
    pf.close();
    expect_error({"plan", "--job", gpt, "--cluster", preset}, "no measured CPU kernel costs");
    // A calibration file cut short in its GEMM grid, and one with a bad meeting cost.
    QFile f(cluster_);
    QVERIFY(f.open(QIODevice::ReadOnly));
    QJsonObject doc = QJsonDocument::fromJson(f.readAll()).object();
    QJsonObject ops = doc["cpu_ops"].toObject();
    QJsonObject gemm = ops["gemm"].toObject();
    QJsonArray rates = gemm["gflops"].toArray();
    rates.removeLast();
    gemm["gflops"] = rates;
    ops["gemm"] = gemm;
    doc["cpu_ops"] = ops;
    const QString cut = dir_.filePath("cut.json");
    QFile cf(cut);
    QVERIFY(cf.open(QIODevice::WriteOnly));
    cf.write(QJsonDocument(doc).toJson());
    cf.close();
    expect_error({"plan", "--job", gpt, "--cluster", cut}, "gemm.gflops");
  }
};

QTEST_GUILESS_MAIN(TestPlanJob)
#include "tst_plan_job.moc"
