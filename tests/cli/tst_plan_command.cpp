// `shardlab plan` as a person and a script use it: GPT-3 175B on 1,024 A100s answered with layouts
// that fit, whose figures hold together (checked here against the model's size, not against the
// planner's own arithmetic); fixed choices kept; a job that fits nowhere said so (exit 1); a
// cluster file written by --print-cluster read back to the same answer; bad input (a missing or
// wrong flag, a corrupt cluster file) one line naming the problem and a non-zero exit.
#include <QtTest>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>

#include "tests/common/process.h"
#include "tests/common/refusal.h"

using shardlab::test::ProcessOutcome;
using shardlab::test::run_process;

namespace {

const QStringList kGpt3 = {"plan", "--layers", "96",        "--hidden",       "12288", "--heads",
                           "96",   "--seq",    "2048",      "--vocab",        "51200", "--gpus",
                           "1024", "--gpu",    "a100-80gb", "--global-batch", "1536"};
// GPT-3 175B's parameters (Brown et al. 2020 table 2.1: 175.0B).
constexpr double kGpt3Params = 175.0e9;
constexpr double kGiB = 1024.0 * 1024 * 1024;

ProcessOutcome cli(const QStringList& args) {
  return run_process(SHARDLAB_CLI, args);
}

QJsonObject json_of(const ProcessOutcome& o) {
  QJsonParseError e{};
  const QJsonDocument d = QJsonDocument::fromJson(o.out.toUtf8(), &e);
  return d.object();
}

// One line on stderr naming `what`, no crash, a non-zero exit.
void expect_error(const QStringList& args, const QString& what) {
  shardlab::test::expect_refusal(cli(args), args.join(' '), what);
}

}  // namespace

class TestPlanCommand : public QObject {
  Q_OBJECT

 private slots:
  void gpt3On1024A100s() {
    const ProcessOutcome o = cli(kGpt3 + QStringList{"--json", "--top", "5"});
    QVERIFY2(o.exit_code == 0, qPrintable(o.err));
    const QJsonObject doc = json_of(o);
    QVERIFY(std::abs(doc["model"]["parameters"].toDouble() / kGpt3Params - 1) < 0.01);
    const QJsonArray plans = doc["plans"].toArray();
    QCOMPARE(plans.size(), 5);
    double previous = 0;
    for (const QJsonValue& v : plans) {
      const QJsonObject p = v.toObject();
      const QJsonObject l = p["layout"].toObject();
      const int pp = l["pp"].toInt(), tp = l["tp"].toInt(), dp = l["dp"].toInt();
      QCOMPARE(pp * tp * dp, 1024);
      QVERIFY(tp <= 8);  // tensor parallelism stays inside a node of 8
      QVERIFY(1536 % (dp * l["micro_batch"].toInt()) == 0);
      QVERIFY(p["fits"].toBool());
      const QJsonObject m = p["memory_gib_per_gpu"].toObject();
      QVERIFY(m["total"].toDouble() <= p["usable_gib"].toDouble());
      QVERIFY(p["usable_gib"].toDouble() <= 80);
      // bf16 parameters: 2 bytes of the model's 175B over tp x pp, and the fullest stage holds at
      // most a stage's layers plus the embedding (3% of the model), so within 10% of that.
      const double params_gib = 2 * kGpt3Params / (tp * pp) / kGiB;
      QVERIFY2(
          m["params"].toDouble() > 0.95 * params_gib && m["params"].toDouble() < 1.10 * params_gib,
          qPrintable(QJsonDocument(p).toJson()));
      // fp32 master weights and Adam's two moments: 12 bytes, over dp too from ZeRO stage 1 on.
      const double state_gib =
          12 * kGpt3Params / (tp * pp) / (l["zero"].toInt() >= 1 ? dp : 1) / kGiB;
      QVERIFY2(m["optimizer_state"].toDouble() > 0.95 * state_gib &&
                   m["optimizer_state"].toDouble() < 1.10 * state_gib,
               qPrintable(QJsonDocument(p).toJson()));
      double sum = 0;
      for (const QJsonValue& part : p["time_seconds"].toObject()) sum += part.toDouble();
      const double step = p["step_seconds"].toDouble();
      QVERIFY(std::abs(sum - step) <= 1e-6 * step);
      QVERIFY(step >= previous);  // best first
      previous = step;
      // Model FLOPs of a step: 72 B L s h^2 (1 + s/6h + V/12hL) (Korthikanti et al. 2022).
      const double B = 1536, L = 96, s = 2048, h = 12288, V = 51200;
      const double flops = 72 * B * L * s * h * h * (1 + s / (6 * h) + V / (12 * h * L));
      QVERIFY(std::abs(p["tflops_per_gpu"].toDouble() / (flops / 1024 / step / 1e12) - 1) < 1e-6);
      QVERIFY(std::abs(p["mfu"].toDouble() - p["tflops_per_gpu"].toDouble() / 312) < 1e-6);
      QVERIFY(!p["why"].toString().isEmpty());
    }
    // The text: the table, the best explained, what is left out.
    const ProcessOutcome text = cli(kGpt3);
    QVERIFY2(text.exit_code == 0, qPrintable(text.err));
    QVERIFY2(text.out.contains("174.6B parameters") && text.out.contains("\nbest: tp ") &&
                 text.out.contains("left out: "),
             qPrintable(text.out));
  }

  void fixedChoicesAreKept() {
    const ProcessOutcome o = cli(kGpt3 + QStringList{"--tp", "8", "--pp", "8", "--zero", "1",
                                                     "--recompute", "full", "--json"});
    QVERIFY2(o.exit_code == 0, qPrintable(o.err));
    const QJsonArray plans = json_of(o)["plans"].toArray();
    QVERIFY(!plans.isEmpty());
    for (const QJsonValue& v : plans) {
      const QJsonObject l = v["layout"].toObject();
      QCOMPARE(l["tp"].toInt(), 8);
      QCOMPARE(l["pp"].toInt(), 8);
      QCOMPARE(l["dp"].toInt(), 16);
      QCOMPARE(l["zero"].toInt(), 1);
      QCOMPARE(l["recompute"].toString(), QString("full"));
    }
  }

  void nothingFits() {
    // 1T parameters on one node: 16 bytes a parameter is 2 TB against 640 GB.
    const ProcessOutcome o =
        cli({"plan", "--layers", "128", "--hidden", "25600", "--heads", "160", "--seq", "2048",
             "--vocab", "51200", "--gpus", "8", "--gpu", "a100-80gb", "--global-batch", "64"});
    QCOMPARE(o.exit_code, 1);
    QVERIFY2(o.out.contains("none fits") && o.out.contains("\nclosest: "), qPrintable(o.out));
  }

  void clusterFileRoundTrip() {
    QTemporaryDir dir;
    const ProcessOutcome printed = cli({"plan", "--gpu", "h100-sxm", "--print-cluster"});
    QVERIFY2(printed.exit_code == 0, qPrintable(printed.err));
    QVERIFY(json_of(printed)["gpu"].toObject()["peak_tflops"].toDouble() == 989);
    const QString file = dir.filePath("h100.json");
    QFile f(file);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(printed.out.toUtf8());
    f.close();
    QStringList with_gpu = kGpt3;
    with_gpu[with_gpu.indexOf("a100-80gb")] = "h100-sxm";
    QStringList with_file = kGpt3;
    const qsizetype at = with_file.indexOf("--gpu");
    with_file[at] = "--cluster";
    with_file[at + 1] = file;
    const ProcessOutcome a = cli(with_gpu + QStringList{"--json"});
    const ProcessOutcome b = cli(with_file + QStringList{"--json"});
    QVERIFY2(a.exit_code == 0 && b.exit_code == 0, qPrintable(a.err + b.err));
    QCOMPARE(json_of(b)["plans"], json_of(a)["plans"]);
    // Corrupt and wrong files: one line naming the file's problem.
    QFile bad(dir.filePath("bad.json"));
    QVERIFY(bad.open(QIODevice::WriteOnly));
    bad.write(QString(printed.out)
                  .replace("\"matmul_efficiency\": 0.6", "\"matmul_efficiency\": 2")
                  .toUtf8());
    bad.close();
    with_file[at + 1] = bad.fileName();
    expect_error(with_file, "'matmul_efficiency' must be in [0.0001, 1], got 2");
    QFile garbage(dir.filePath("garbage.json"));
    QVERIFY(garbage.open(QIODevice::WriteOnly));
    garbage.write("{\"gpu\": ");
    garbage.close();
    with_file[at + 1] = garbage.fileName();
    expect_error(with_file, "garbage.json: not valid JSON");
    with_file[at + 1] = dir.filePath("missing.json");
    expect_error(with_file, "--cluster: cannot read");
  }

  // This machine measured into a cluster file that --cluster reads back.
  void calibrateWritesAClusterFile() {
    QTemporaryDir dir;
    const QString file = dir.filePath("here.json");
    const ProcessOutcome o = cli({"plan", "--calibrate", "--out", file});
    QVERIFY2(o.exit_code == 0, qPrintable(o.err));
    QFile f(file);
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QJsonObject doc = QJsonDocument::fromJson(f.readAll()).object();
    const QJsonObject measured = doc["measured"].toObject();
    for (const char* key : {"gemm_gflops", "triad_gb_per_second", "all_reduce_latency_us",
                            "all_reduce_busbw_gb_per_second"})
      QVERIFY2(measured[key].toDouble() > 0, key);
    QCOMPARE(doc["gpus_per_node"].toInt(), measured["cores"].toInt());
    // GFLOP/s of a core as the cluster's peak TFLOP/s.
    QVERIFY(std::abs(doc["gpu"].toObject()["peak_tflops"].toDouble() * 1000 /
                         measured["gemm_gflops"].toDouble() -
                     1) < 1e-9);
    const ProcessOutcome planned = cli({"plan", "--cluster", file, "--model", "megatron-1.7b",
                                        "--gpus", "2", "--global-batch", "8", "--json"});
    QVERIFY2(planned.finished && (planned.exit_code == 0 || planned.exit_code == 1),
             qPrintable(planned.err));
    QVERIFY(!json_of(planned)["plans"].toArray().isEmpty());
    expect_error({"plan", "--out", file}, "--out goes with --calibrate");
  }

  void badInput() {
    QStringList no_layers = kGpt3;
    no_layers.remove(no_layers.indexOf("--layers"), 2);
    expect_error(no_layers, "--layers is required");
    QStringList gpu = kGpt3;
    gpu[gpu.indexOf("a100-80gb")] = "v100";
    expect_error(gpu, "--gpu: must be one of a100-80gb, a100-40gb, h100-sxm, h200, got 'v100'");
    expect_error(kGpt3 + QStringList{"--tp", "3"}, "tp 3 does not divide the 1024 GPUs");
    expect_error(kGpt3 + QStringList{"--recompute", "some"},
                 "--recompute: must be none, selective or full, got 'some'");
    expect_error(kGpt3 + QStringList{"--zero", "4"}, "--zero");
    expect_error(kGpt3 + QStringList{"--heads", "100"},
                 "hidden 12288 is not a multiple of heads 100");
    expect_error(kGpt3 + QStringList{"--pp", "1", "--zero", "0", "--recompute", "none", "--tp", "8",
                                     "--micro-batch", "5"},
                 "does not divide the batch");
  }
};

QTEST_GUILESS_MAIN(TestPlanCommand)
#include "tst_plan_command.moc"
