// The `shardlab` command as a user meets it: real processes, real files. Every bad input ends with
// one clear line on stderr and the documented exit status (1 failed command, 2 usage), never a
// crash, an uncaught exception or a stack dump; a small real job trains and prints its summary.
#include <QtTest>

#include <cmath>

#include <QMap>
#include <QProcess>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QTemporaryDir>

namespace {

struct Outcome {
  int exit_code = -1;
  QProcess::ExitStatus status = QProcess::CrashExit;
  QString out, err;
};

Outcome run_cli(const QStringList& args, int timeout_ms = 120000) {
  QProcess p;
  p.setWorkingDirectory(SHARDLAB_SOURCE_DIR);
  p.start(SHARDLAB_CLI, args);
  Outcome o;
  if (!p.waitForFinished(timeout_ms)) {
    p.kill();
    p.waitForFinished(5000);
    o.err = "timed out";
    return o;
  }
  o.exit_code = p.exitCode();
  o.status = p.exitStatus();
  o.out = QString::fromUtf8(p.readAllStandardOutput());
  o.err = QString::fromUtf8(p.readAllStandardError());
  return o;
}

const QString kMlpJob = "resources/jobs/fashion_mlp.json";

}  // namespace

class TestCli : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir tmp_;

  QString write(const QString& name, const QByteArray& bytes) {
    QFile f(tmp_.filePath(name));
    if (!f.open(QIODevice::WriteOnly)) qFatal("cannot write %s", qPrintable(f.fileName()));
    f.write(bytes);
    return f.fileName();
  }

 private slots:
  void badInputGivesOneClearLine_data() {
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<int>("exitCode");
    QTest::addColumn<QString>("message");  // must appear on stderr's first line

    QTest::newRow("no command") << QStringList{} << 2 << "usage: shardlab";
    QTest::newRow("unknown command")
        << QStringList{"frobnicate"} << 2 << "unknown command 'frobnicate'";
    QTest::newRow("run without job") << QStringList{"run"} << 2 << "run needs exactly one job file";
    QTest::newRow("wrong flag") << QStringList{"run", kMlpJob, "--bogus"} << 2
                                << "unknown option '--bogus'";
    QTest::newRow("flag without value")
        << QStringList{"run", kMlpJob, "--set"} << 2 << "option '--set' needs a value";
    QTest::newRow("missing job file")
        << QStringList{"run", "no/such/job.json"} << 1 << "no/such/job.json";
    QTest::newRow("unknown optimizer")
        << QStringList{"run", kMlpJob, "--set", "optimizer.name=adamm"} << 1
        << "optimizer.name: unknown optimizer 'adamm'";
    QTest::newRow("unknown field") << QStringList{"run", kMlpJob, "--set", "optimizer.lrr=1"} << 1
                                   << "optimizer.lrr: unknown field";
    QTest::newRow("bad value") << QStringList{"run", kMlpJob, "--set", "train.batch_size=-3"} << 1
                               << "train.batch_size";
    QTest::newRow("malformed override")
        << QStringList{"run", kMlpJob, "--set", "novalue"} << 1 << "expected key=value";
    QTest::newRow("missing dataset")
        << QStringList{"run", kMlpJob, "--set", "data.path=/nonexistent/fmnist"} << 1
        << "apt-get install dataset-fashion-mnist";
    QTest::newRow("bench without target") << QStringList{"bench"} << 2 << "bench needs a target";
    QTest::newRow("bench bad integer") << QStringList{"bench", "optimizer", "--params", "lots"} << 2
                                       << "needs an integer, got 'lots'";
    QTest::newRow("bench unknown optimizer")
        << QStringList{"bench", "optimizer", "--optimizers", "adam,lion"} << 2
        << "unknown optimizer 'lion'";
    QTest::newRow("bench sharded batch not divisible")
        << QStringList{"bench", "sharded", "--ranks", "2", "--batch", "63"} << 2
        << "--batch: the global batch (63) must divide by --ranks (2)";
    QTest::newRow("bench sharded unknown model")
        << QStringList{"bench", "sharded", "--model", "resnet"} << 2 << "unknown model 'resnet'";
  }

  void badInputGivesOneClearLine() {
    QFETCH(QStringList, args);
    QFETCH(int, exitCode);
    QFETCH(QString, message);
    const Outcome o = run_cli(args);
    QCOMPARE(o.status, QProcess::NormalExit);
    QCOMPARE(o.exit_code, exitCode);
    const QString first = o.err.section('\n', 0, 0);
    QVERIFY2(first.contains(message), qPrintable(o.err));
    QVERIFY2(!o.err.contains("terminate called") && !o.err.contains("Aborted"), qPrintable(o.err));
  }

  void malformedJobFilesNameFileAndPlace() {
    const QString trailing =
        write("trailing.json", "{\"name\": \"x\",\n  \"train\": {\"steps\": 10,}\n}");
    Outcome o = run_cli({"run", trailing});
    QCOMPARE(o.exit_code, 1);
    QVERIFY2(o.err.startsWith("shardlab: error: " + trailing + ":2:"), qPrintable(o.err));
    QCOMPARE(o.err.count('\n'), 1);  // one line

    const QString garbage = write("garbage.json", QByteArray("\x00\x01\xff garbage", 11));
    o = run_cli({"run", garbage});
    QCOMPARE(o.exit_code, 1);
    QVERIFY2(o.err.contains("invalid JSON"), qPrintable(o.err));

    const QString dup = write("dup.json", R"({"name": "a", "name": "b"})");
    o = run_cli({"run", dup});
    QCOMPARE(o.exit_code, 1);
    QVERIFY2(o.err.contains("more than once"), qPrintable(o.err));

    o = run_cli({"run", tmp_.path()});  // a directory, not a file
    QCOMPARE(o.exit_code, 1);
    QVERIFY2(o.err.contains(tmp_.path()), qPrintable(o.err));
  }

  void smallJobTrainsAndSummarises() {
    const Outcome o = run_cli({"run", "resources/jobs/chars_gpt.json", "--set", "train.steps=6",
                               "--set", "train.log_every=3", "--set", "train.eval_every=0", "--set",
                               "train.eval_batches=1", "--set", "model.gpt.layers=1"});
    QVERIFY2(o.exit_code == 0, qPrintable(o.err));
    QVERIFY2(o.out.contains("step      3/6"), qPrintable(o.out));
    QVERIFY2(o.out.contains("tokens/s"), qPrintable(o.out));
    QVERIFY2(o.out.contains("summary: completed 6 steps"), qPrintable(o.out));
    QVERIFY(o.err.isEmpty());
  }

  // The threads backend's bench on small sizes: a table row per size, and the memcpy reference.
  void benchCommThreads() {
    const Outcome o = run_cli({"bench", "comm", "--backend", "threads", "--ranks", "3",
                               "--max-bytes", "16384", "--ops", "all_reduce,all_gather"});
    QVERIFY2(o.exit_code == 0, qPrintable(o.err));
    QVERIFY2(o.out.contains("single-core memcpy"), qPrintable(o.out));
    QVERIFY2(o.out.contains("threads backend, 3 ranks"), qPrintable(o.out));
    for (const char* size : {"1 KiB", "2 KiB", "4 KiB", "8 KiB", "16 KiB"})
      QVERIFY2(o.out.contains(size), qPrintable(o.out));
    QCOMPARE(o.out.count("all_reduce"), 5);
    QCOMPARE(o.out.count("all_gather"), 5);
  }

  // The mpi backend's bench under a real mpirun with 2 processes, raw MPI measured beside it.
  void benchCommMpi() {
    const QString mpirun = QStandardPaths::findExecutable("mpirun");
    if (mpirun.isEmpty()) QSKIP("mpirun not found (apt-get install openmpi-bin)");
    QProcess p;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("OMPI_ALLOW_RUN_AS_ROOT", "1");
    env.insert("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    p.setProcessEnvironment(env);
    p.start(mpirun, {"-np", "2", "--oversubscribe", SHARDLAB_CLI, "bench", "comm", "--backend",
                     "mpi", "--max-bytes", "65536", "--ops", "all_reduce"});
    QVERIFY(p.waitForFinished(120000));
    const QString out = QString::fromUtf8(p.readAllStandardOutput());
    QVERIFY2(p.exitCode() == 0, qPrintable(out + QString::fromUtf8(p.readAllStandardError())));
    QVERIFY2(out.contains("mpi backend, 2 ranks"), qPrintable(out));
    QVERIFY2(out.contains("raw MPI"), qPrintable(out));
    QCOMPARE(out.count("all_reduce"), 7);  // 1 KiB .. 64 KiB, printed once (by rank 0)
  }

  // The sharded-optimizer bench on a tiny configuration: one row per strategy with sane figures
  // (the ledger equal to the planner, memory falling from ddp to fsdp, the same loss everywhere).
  void benchShardedThreads() {
    const Outcome o =
        run_cli({"bench", "sharded", "--backend", "threads", "--ranks", "2", "--steps", "3",
                 "--warmup", "1", "--batch", "16", "--train-limit", "256", "--overlap", "on"});
    QVERIFY2(o.exit_code == 0, qPrintable(o.err));
    QVERIFY2(o.out.contains("235146 parameters"), qPrintable(o.out));
    QVERIFY2(o.out.contains("threads backend: 2 ranks on "), qPrintable(o.out));
    const QStringList strategies{"ddp", "zero1", "zero2", "fsdp"};
    QMap<QString, QStringList> rows;  // strategy -> its cells
    for (const QString& line : o.out.split('\n')) {
      const QStringList cells = line.split(' ', Qt::SkipEmptyParts);
      if (cells.size() != 11 || !strategies.contains(cells[0])) continue;
      QVERIFY2(!rows.contains(cells[0]), qPrintable("two rows for " + cells[0] + "\n" + o.out));
      QCOMPARE(cells[1], QString("on"));
      rows[cells[0]] = cells;
    }
    QCOMPARE(rows.size(), strategies.size());
    // NaN for a cell that is not a number: every check below then fails.
    auto num = [&](const QString& s, int col) {
      bool ok = false;
      const double v = rows[s][col].toDouble(&ok);
      return ok ? v : std::nan("");
    };
    QCOMPARE(rows["ddp"][4], QString("1.00"));  // vs ddp
    double previous_steady = 1e30;
    for (const QString& s : strategies) {
      const double step_ms = num(s, 2), vs_ddp = num(s, 4), steady = num(s, 5), plan = num(s, 6),
                   peak = num(s, 7), comm_ms = num(s, 8), comm_ops = num(s, 9), loss = num(s, 10);
      QVERIFY2(step_ms > 0 && step_ms < 10000, qPrintable(o.out));
      QVERIFY2(vs_ddp > 0, qPrintable(o.out));
      QVERIFY2(steady == plan, qPrintable(o.out));  // the ledger measures what the planner says
      QVERIFY2(steady < previous_steady, qPrintable(o.out));  // ddp > zero1 > zero2 > fsdp
      previous_steady = steady;
      QVERIFY2(peak >= steady, qPrintable(o.out));
      QVERIFY2(comm_ms >= 0 && comm_ops >= 1, qPrintable(o.out));
      QVERIFY2(loss > 0 && std::abs(loss - num("ddp", 10)) < 1e-3, qPrintable(o.out));
    }
    QVERIFY2(o.out.contains(QRegularExpression(
                 R"(overlap on : zero2 / ddp step time = \d+\.\d\d \(goal <= 1\.15\))")),
             qPrintable(o.out));
    QVERIFY2(!o.out.contains("overlap off"), qPrintable(o.out));
  }

  void infoReportsBuild() {
    const Outcome o = run_cli({"info"});
    QCOMPARE(o.exit_code, 0);
    QVERIFY(o.out.startsWith("shardlab "));
    QVERIFY(o.out.contains("mpi: ") && o.out.contains("cuda: "));
    QVERIFY2(o.out.contains("blas: OpenBLAS"), qPrintable(o.out));
  }
};

QTEST_GUILESS_MAIN(TestCli)
#include "tst_cli.moc"
