// `shardlab doctor` as a user runs it. On a node without a usable GPU (or a build without the CUDA
// kernels) each of its five groups is one skip line naming the reason, the run exits 0 (and 1 with
// --device cuda, which asks for a GPU), and --json says the same; on a node with one, every check
// passes. Bad options end with one line and exit status 2 (usage) or 1.
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include "tests/common/process.h"

using shardlab::test::ProcessOptions;
using shardlab::test::ProcessOutcome;
using shardlab::test::run_process;

namespace {

const QStringList kGroups{"kernels", "model", "training", "memory", "nccl"};

ProcessOutcome doctor(const QStringList& args) {
  ProcessOptions o;
  o.timeout_ms = 600000;  // with a GPU the checks train a few small jobs
  return run_process(SHARDLAB_CLI, QStringList{"doctor"} + args, o);
}

}  // namespace

class TestDoctor : public QObject {
  Q_OBJECT

  QJsonObject report_;  // `doctor --json` of this node
  bool gpu_ = false;

 private slots:
  void initTestCase() {
    const ProcessOutcome r = doctor({"--json"});
    QVERIFY2(r.finished, qPrintable(r.err));
    QJsonParseError e;
    const QJsonDocument doc = QJsonDocument::fromJson(r.out.toUtf8(), &e);
    QVERIFY2(e.error == QJsonParseError::NoError && doc.isObject(), qPrintable(r.out + r.err));
    report_ = doc.object();
    gpu_ = !report_["gpus"].toArray().isEmpty();
    qInfo("gpus: %s; %d passed, %d failed, %d skipped",
          qPrintable(QJsonDocument(report_["gpus"].toArray()).toJson(QJsonDocument::Compact)),
          report_["passed"].toInt(), report_["failed"].toInt(), report_["skipped"].toInt());
    QCOMPARE(r.exit_code, report_["failed"].toInt() > 0 ? 1 : 0);
    // The table went to stderr, the summary with it.
    QVERIFY2(r.err.contains("doctor: ") && r.err.contains(" passed, "), qPrintable(r.err));
  }

  // Without a GPU: one skip per group, each saying why; nothing passes or fails.
  void withoutGpuEveryGroupSaysWhy() {
    if (gpu_) QSKIP("this node has a GPU: see withGpuEveryCheckPasses");
    const QJsonArray checks = report_["checks"].toArray();
    QCOMPARE(checks.size(), kGroups.size());
    QStringList groups;
    for (const QJsonValue& v : checks) {
      const QJsonObject c = v.toObject();
      groups << c["group"].toString();
      QCOMPARE(c["status"].toString(), QStringLiteral("skip"));
      const QString why = c["detail"].toString();
      QVERIFY2(why.startsWith("no usable GPU: ") || why.contains("built without the CUDA kernels"),
               qPrintable(why));
      QVERIFY2(why.size() > 16 && !why.contains('\n'), qPrintable(why));
    }
    QCOMPARE(groups, kGroups);
    QCOMPARE(report_["passed"].toInt(), 0);
    QCOMPARE(report_["failed"].toInt(), 0);
    QCOMPARE(report_["skipped"].toInt(), static_cast<int>(kGroups.size()));
    QVERIFY(!report_["no_gpu_reason"].toString().isEmpty());

    // The table: one line per group, "<group> ... skip  <why>".
    const ProcessOutcome r = doctor({});
    QCOMPARE(r.exit_code, 0);
    for (const QString& g : kGroups) {
      const QRegularExpression line(
          "^" + g + " +.* skip  (no usable GPU: |this shardlab was built)",
          QRegularExpression::MultilineOption);
      QVERIFY2(line.match(r.out).hasMatch(), qPrintable(g + ":\n" + r.out));
    }
    QVERIFY2(r.out.contains("doctor: 0 passed, 0 failed, 5 skipped"), qPrintable(r.out));

    // --device cuda asks for a GPU: the same lines, then one saying there is none, exit 1.
    const ProcessOutcome cuda = doctor({"--device", "cuda"});
    QCOMPARE(cuda.exit_code, 1);
    QVERIFY2(cuda.out.contains("doctor: --device cuda, but this node has no GPU to check"),
             qPrintable(cuda.out));
  }

  // With a GPU: every check passes (a skip only for what needs two GPUs).
  void withGpuEveryCheckPasses() {
    if (!gpu_) QSKIP("no usable GPU on this node: see withoutGpuEveryGroupSaysWhy");
    QCOMPARE(report_["failed"].toInt(), 0);
    QVERIFY(report_["passed"].toInt() > 400);
    for (const QJsonValue& v : report_["checks"].toArray()) {
      const QJsonObject c = v.toObject();
      if (c["status"].toString() == "skip")
        QVERIFY2(c["detail"].toString().startsWith("needs two GPUs"),
                 qPrintable(c["name"].toString() + ": " + c["detail"].toString()));
    }
  }

  // --groups picks groups, in the doctor's order.
  void groupsSubset() {
    const ProcessOutcome r = doctor({"--groups", "nccl,model", "--json"});
    QVERIFY2(r.finished, qPrintable(r.err));
    const QJsonArray checks = QJsonDocument::fromJson(r.out.toUtf8())["checks"].toArray();
    QVERIFY(!checks.isEmpty());
    QString last;
    for (const QJsonValue& v : checks) {
      const QString g = v.toObject()["group"].toString();
      QVERIFY2(g == "model" || g == "nccl", qPrintable(g));
      QVERIFY2(!(last == "nccl" && g == "model"), "nccl before model");
      last = g;
    }
  }

  void badOptionsOneLine_data() {
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<int>("status");
    QTest::addColumn<QString>("says");
    QTest::newRow("unknown device") << QStringList{"--device", "tpu"} << 2
                                    << "--device: unknown device 'tpu' (known: cuda, all)";
    QTest::newRow("unknown group") << QStringList{"--groups", "kernels,bogus"} << 1
                                   << "--groups: unknown group 'bogus' (known: kernels, model, "
                                      "training, memory, nccl)";
    QTest::newRow("empty groups") << QStringList{"--groups", ","} << 2
                                  << "--groups: expected a comma-separated list";
    QTest::newRow("positional") << QStringList{"extra"} << 2 << "extra";
  }
  void badOptionsOneLine() {
    QFETCH(QStringList, args);
    QFETCH(int, status);
    QFETCH(QString, says);
    const ProcessOutcome r = doctor(args);
    QCOMPARE(r.exit_code, status);
    QVERIFY2(r.err.contains(says), qPrintable(r.err));
    QVERIFY2(r.out.isEmpty(), qPrintable(r.out));
  }

  // tests/gpu/device_check.sh runs only on a lent GPU machine, so here: both scripts parse, and
  // every `shardlab` command and option it uses exists (a renamed option breaks this, not the
  // next GPU session).
  void deviceScriptUsesRealOptions() {
    const QString dir = SHARDLAB_SOURCE_DIR "/tests/gpu/";
    for (const char* script : {"device_check.sh", "fetch_deps.sh"}) {
      const ProcessOutcome r = run_process("bash", {"-n", dir + script});
      QVERIFY2(r.exit_code == 0, qPrintable(script + (": " + r.err)));
    }
    QFile f(dir + "device_check.sh");
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QStringList lines = QString::fromUtf8(f.readAll()).split('\n');
    static const QRegularExpression call("\"\\$sl\" ((?:bench |checkpoint )?[a-z][a-z-]*)(.*)$");
    static const QRegularExpression option("(--[a-z][a-z-]*)");
    int calls = 0;
    QString common;  // the run options the script keeps in an array
    for (const QString& l : lines)
      if (l.contains("common=(") || l.startsWith("    --set")) common += l;
    for (int i = 0; i < lines.size(); ++i) {
      const QRegularExpressionMatch m = call.match(lines[i]);
      if (!m.hasMatch()) continue;
      ++calls;
      QString rest = m.captured(2);
      for (int j = i; lines[j].trimmed().endsWith('\\') && j + 1 < lines.size(); ++j)
        rest += lines[j + 1];
      if (rest.contains("common[@]")) rest += common;
      const QString cmd = m.captured(1);
      const ProcessOutcome help = run_process(SHARDLAB_CLI, QStringList{"help"} + cmd.split(' '));
      QVERIFY2(help.exit_code == 0, qPrintable(cmd + ": " + help.err));
      for (auto it = option.globalMatch(rest); it.hasNext();) {
        const QString o = it.next().captured(1);
        QVERIFY2(help.out.contains(o), qPrintable("device_check.sh: shardlab " + cmd + " " + o));
      }
    }
    QVERIFY2(calls >= 6, "device_check.sh: no shardlab calls found");
  }

  // The script itself, rehearsed on this node with the build's own shardlab (SHARDLAB_BIN skips
  // its configure and build): every stage runs, the GPU ones fail for want of a GPU, and each
  // stage's JSON reaches device_check.json intact. (Its progress lines once went to the stages'
  // stdout, into their JSON files, so the H200 run of 2026-11-27 kept no doctor or bench JSON.)
  void deviceScriptKeepsEveryStagesJson() {
    if (gpu_) QSKIP("this node has a GPU: run tests/gpu/device_check.sh itself");
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    ProcessOptions o;
    o.timeout_ms = 300000;
    o.env.insert("SHARDLAB_BIN", SHARDLAB_CLI);
    o.env.insert("TMPDIR", dir.path());
    const QString out = dir.filePath("out");
    const ProcessOutcome r =
        run_process("bash", {SHARDLAB_SOURCE_DIR "/tests/gpu/device_check.sh", out}, o);
    QVERIFY2(r.finished, qPrintable(r.err));
    QCOMPARE(r.exit_code, 1);  // the GPU stages failed
    QFile f(out + "/device_check.json");
    QVERIFY2(f.open(QIODevice::ReadOnly), qPrintable(r.out.right(3000)));
    QJsonParseError e;
    const QJsonObject doc = QJsonDocument::fromJson(f.readAll(), &e).object();
    QVERIFY2(e.error == QJsonParseError::NoError, qPrintable(e.errorString()));
    QVERIFY(QFile::exists(out + "/device_check.log"));
    QMap<QString, int> exits;
    for (const QJsonValue& v : doc["stages"].toArray())
      exits[v["name"].toString()] = v["exit"].toInt(-1);
    for (const char* s :
         {"info", "bench_model", "run_fashion_mlp_cpu", "run_fashion_mlp_cpu_native",
          "run_chars_gpt_cpu", "run_chars_gpt_cpu_native"})
      QVERIFY2(exits.value(s, -1) == 0, qPrintable(QString(s) + ": " + r.out.right(3000)));
    for (const char* s : {"doctor", "bench_optimizer", "run_chars_gpt_cuda", "run_cuda_ddp_verify",
                          "run_cuda_zero2_shared_verify", "run_cuda_3d_verify"})
      QVERIFY2(exits.contains(s) && exits[s] != 0, s);
    QVERIFY2(!exits.contains("configure") && !exits.contains("build"),
             "SHARDLAB_BIN builds nothing");
    // The stages' documents, as the commands printed them (the same as doctor --json here).
    const QJsonObject doctor = doc["doctor"].toObject();
    QCOMPARE(doctor["command"].toString(), report_["command"].toString());
    QCOMPARE(doctor["skipped"].toInt(), int(kGroups.size()));
    QCOMPARE(doctor["failed"].toInt(), 0);
    QCOMPARE(doctor["no_gpu_reason"].toString(), report_["no_gpu_reason"].toString());
    QVERIFY2(!doc["bench_model"]["rows"].toArray().isEmpty(), "bench_model has no rows");
  }

  void helpDocumentsIt() {
    const ProcessOutcome r = run_process(SHARDLAB_CLI, {"help", "doctor"});
    QCOMPARE(r.exit_code, 0);
    for (const char* s : {"--device", "cuda|all", "--groups", "--json", "no dataset",
                          "kernels,model,training,memory,nccl"})
      QVERIFY2(r.out.contains(s), s);
    const ProcessOutcome overview = run_process(SHARDLAB_CLI, {"help"});
    QVERIFY2(overview.out.contains("doctor"), qPrintable(overview.out));
  }
};

QTEST_GUILESS_MAIN(TestDoctor)
#include "tst_doctor.moc"
