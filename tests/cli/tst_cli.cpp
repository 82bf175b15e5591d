// The `shardlab` command as a user meets it: real processes, real files. Every bad input ends with
// one clear line on stderr and the documented exit status (1 failed command, 2 usage), never a
// crash, an uncaught exception or a stack dump; a small real job trains and prints its summary.
#include <QtTest>

#include <cmath>

#include <QDir>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QMap>
#include <QProcess>
#include <QRegularExpression>
#include <QSet>
#include <QStandardPaths>
#include <QTemporaryDir>

#include "tests/cli/shardlab_cli.h"
#include "tests/common/scratch_dir.h"

namespace {

using Outcome = shardlab::test::CliOutcome;
using shardlab::test::cli_runs_dir;

Outcome run_cli(const QStringList& args, int timeout_ms = 120000) {
  return shardlab::test::run_shardlab(args, timeout_ms);
}

const QString kMlpJob = "resources/jobs/fashion_mlp.json";

// The arguments of `shardlab run` for kMlpJob with each of `assignments` as a --set, unrecorded.
QStringList mlp_job_args(const QStringList& assignments) {
  QStringList args{kMlpJob};
  for (const QString& a : assignments) args << "--set" << a;
  return args << "--no-record";
}

}  // namespace

class TestCli : public QObject {
  Q_OBJECT
 private:
  shardlab::test::ScratchDir tmp_;

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
    QTest::newRow("checkpoint without inspect")
        << QStringList{"checkpoint"} << 2 << "checkpoint needs 'inspect DIR'";
    QTest::newRow("checkpoint inspect missing dir")
        << QStringList{"checkpoint", "inspect", "/nonexistent/ckpt"} << 1
        << "/nonexistent/ckpt: no such checkpoint directory";
    QTest::newRow("resume missing dir")
        << QStringList{"run", kMlpJob, "--resume", "/nonexistent/ckpt"} << 1
        << "/nonexistent/ckpt: no such checkpoint directory";
    QTest::newRow("resume with strategy none")
        << QStringList{"run",      kMlpJob,
                       "--set",    "parallel.strategy=none",
                       "--set",    "parallel.world_size=1",
                       "--set",    "parallel.backend=threads",
                       "--resume", "/nonexistent/ckpt"}
        << 1 << "--resume: checkpoints hold the ranks' sharded state";
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
    QTest::newRow("bench hybrid unknown strategy")
        << QStringList{"bench", "hybrid", "--strategy", "fsdp"} << 2
        << "--strategy: unknown strategy 'fsdp' (known: ddp, zero1, zero2)";
    QTest::newRow("http malformed")
        << QStringList{"run", kMlpJob, "--http", "nonsense"} << 2 << "--http: expected HOST:PORT";
    QTest::newRow("http with another collector")
        << QStringList{"run", kMlpJob, "--http", "127.0.0.1:0", "--telemetry", "127.0.0.1:9"} << 2
        << "--http serves this run's own collector";
    QTest::newRow("http bad address")
        << QStringList{"run", kMlpJob, "--http", "999.1.1.1:0"} << 1 << "--http: cannot listen on";
    QTest::newRow("replay job without http") << QStringList{"replay", "x.slrec", "--job", kMlpJob}
                                             << 2 << "--job and --duration only apply with --http";
    QTest::newRow("monitor job without http")
        << QStringList{"monitor", "--listen", "127.0.0.1:0", "--job", kMlpJob} << 2
        << "--job only applies with --http";

    // Values from files and the command line are checked before use: a number out of double's
    // range, nesting deep enough to exhaust the stack of anything recursive, and model sizes that
    // cannot be allocated or overflow the layout math each give one line naming the field, never
    // an internal error or a crash.
    QTest::newRow("job number out of range")
        << QStringList{"run",
                       tmp_.write("huge_lr.json", R"({"name": "x", "optimizer": {"lr": 1e400}})")}
        << 1 << "huge_lr.json: optimizer.lr: 1e400 is out of range (not a finite number)";
    QTest::newRow("override number out of range")
        << QStringList{"run", kMlpJob, "--set", "optimizer.lr=-1e400"} << 1
        << "optimizer.lr: -1e400 is out of range (not a finite number)";
    const QByteArray deep = QByteArray(100000, '[') + QByteArray(100000, ']');
    QTest::newRow("job nested deeply")
        << QStringList{"run", tmp_.write("deep.json", "{\"name\": " + deep + "}")} << 1
        << "deep.json: nested deeper than 64 levels";
    QTest::newRow("override nested deeply")
        << QStringList{"run", kMlpJob, "--set",
                       "model.mlp.hidden=" + QString(10000, '[') + QString(10000, ']')}
        << 1 << "model.mlp.hidden: nested deeper than 64 levels";
    QTest::newRow("absurd hidden width")
        << QStringList{"run", kMlpJob, "--set", "model.mlp.hidden=[4611686018427387904]"} << 1
        << "model.mlp.hidden[0]: must be at most 16777216 (2^24), got 4611686018427387904";
    QTest::newRow("too many parameters")
        << QStringList{"run", kMlpJob, "--set", "model.mlp.hidden=[3000000]"} << 1
        << "model.mlp.hidden[0]: the model would have 2385000010 parameters";
    const QString manifest =
        R"({"format_version": 2, "step": %1, "strategy": "ddp", "world_size": 1, "pp": 1,
            "tp": 1, "dp": 1, "layout": %2, "checksum": "crc32", "shards": []})";
    QDir(tmp_.path()).mkpath("deep_ckpt");
    tmp_.write("deep_ckpt/manifest.json", manifest.arg("0", QString::fromLatin1(deep)).toUtf8());
    QTest::newRow("manifest nested deeply")
        << QStringList{"checkpoint", "inspect", tmp_.filePath("deep_ckpt")} << 1
        << "deep_ckpt/manifest.json: nested deeper than 64 levels";
    QDir(tmp_.path()).mkpath("huge_ckpt");
    tmp_.write("huge_ckpt/manifest.json", manifest.arg("1e400", "{}").toUtf8());
    QTest::newRow("manifest number out of range")
        << QStringList{"checkpoint", "inspect", tmp_.filePath("huge_ckpt")} << 1
        << "huge_ckpt/manifest.json: step: 1e400 is out of range (not a finite number)";
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

  // --record never replaces an existing file unless --force: the run is refused with one line
  // and the file keeps its bytes (before, it was truncated and overwritten).
  // A node's virtual-memory limit (ulimit -v 1000000, as some sites set): OpenBLAS started on
  // every core hung before main() under it. Now --help answers, and a run under mpirun (its
  // workers under the same limit) ends: trained, or one line naming the limit. OPENBLAS_NUM_THREADS
  // is removed from the environment: the suite sets it, and a user would not have.
  void virtualMemoryLimitNeverHangs() {
    const QString cli = SHARDLAB_CLI;
    auto limited = [&](const QString& command) {
      QProcess p;
      p.setWorkingDirectory(SHARDLAB_SOURCE_DIR);
      QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
      env.remove("OPENBLAS_NUM_THREADS");
      env.insert("OMPI_ALLOW_RUN_AS_ROOT", "1");
      env.insert("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
      env.insert("SHARDLAB_RUNS_DIR", cli_runs_dir());
      p.setProcessEnvironment(env);
      p.start("sh", {"-c", "ulimit -v 1000000 && exec " + command});
      Outcome o;
      if (!p.waitForFinished(60000)) {
        p.kill();
        p.waitForFinished(5000);
        o.err = "timed out (hung) after 60 s: " + command;
        return o;
      }
      o.exit_code = p.exitCode();
      o.out = QString::fromUtf8(p.readAllStandardOutput());
      o.err = QString::fromUtf8(p.readAllStandardError());
      return o;
    };
    const Outcome help = limited(cli + " --help");
    QVERIFY2(help.exit_code == 0 && help.out.startsWith("usage: shardlab"), qPrintable(help.err));
    const Outcome run =
        limited(cli + " run " + kMlpJob +
                " --set parallel.backend=mpi --set parallel.world_size=2"
                " --set train.steps=3 --set train.eval_every=0 --quiet --no-record");
    QVERIFY2(!run.err.startsWith("timed out"), qPrintable(run.err));
    QVERIFY2(run.exit_code == 0 || run.err.contains("virtual-memory limit of 976 MiB (ulimit -v)"),
             qPrintable(run.out + run.err));
  }

  void recordRefusesToOverwrite() {
    const QString existing = tmp_.write("precious.slrec", "not to be lost");
    Outcome o = run_cli({"run", kMlpJob, "--record", existing, "--set", "train.steps=2"});
    QCOMPARE(o.exit_code, 2);
    QVERIFY2(o.err.contains("--record: " + existing + " already exists (give --force"),
             qPrintable(o.err));
    QFile f(existing);
    QVERIFY(f.open(QIODevice::ReadOnly));
    QCOMPARE(f.readAll(), QByteArray("not to be lost"));
    f.close();
    o = run_cli({"monitor", "--listen", "127.0.0.1:0", "--record", existing, "--duration", "1"});
    QCOMPARE(o.exit_code, 2);
    QVERIFY2(o.err.contains("already exists"), qPrintable(o.err));
    QVERIFY(f.open(QIODevice::ReadOnly));
    QCOMPARE(f.readAll(), QByteArray("not to be lost"));
    f.close();
    o = run_cli({"run", kMlpJob, "--record", existing, "--force", "--quiet", "--set",
                 "train.steps=2", "--set", "train.eval_every=0"});
    QVERIFY2(o.exit_code == 0, qPrintable(o.err));
    QVERIFY(f.open(QIODevice::ReadOnly));
    QVERIFY(f.readAll().startsWith("SLREC"));  // a recording now
  }

  void malformedJobFilesNameFileAndPlace() {
    const QString trailing =
        tmp_.write("trailing.json", "{\"name\": \"x\",\n  \"train\": {\"steps\": 10,}\n}");
    Outcome o = run_cli({"run", trailing});
    QCOMPARE(o.exit_code, 1);
    QVERIFY2(o.err.startsWith("shardlab: error: " + trailing + ":2:"), qPrintable(o.err));
    QCOMPARE(o.err.count('\n'), 1);  // one line

    const QString garbage = tmp_.write("garbage.json", QByteArray("\x00\x01\xff garbage", 11));
    o = run_cli({"run", garbage});
    QCOMPARE(o.exit_code, 1);
    QVERIFY2(o.err.contains("invalid JSON"), qPrintable(o.err));

    const QString dup = tmp_.write("dup.json", R"({"name": "a", "name": "b"})");
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

  // --verify says what its tolerance is based on (the noise floor measured on the job), and a
  // tolerance below the difference fails with exit status 1.
  void verifyStatesItsBasisAndCanFail() {
    const QStringList job{"run",     "resources/jobs/fashion_mlp.json",
                          "--set",   "train.steps=3",
                          "--set",   "train.eval_every=0",
                          "--quiet", "--no-record",
                          "--verify"};
    Outcome o = run_cli(job);
    QVERIFY2(o.exit_code == 0, qPrintable(o.out + o.err));
    QVERIFY2(o.out.contains("(noise floor ") && o.out.contains("micro-batches") &&
                 o.out.contains("x sqrt(3 steps))) OK"),
             qPrintable(o.out));
    o = run_cli(job + QStringList{"--tolerance", "1e-30"});
    QVERIFY2(o.exit_code == 1, qPrintable(o.out + o.err));
    QVERIFY2(o.out.contains("tolerance=1.000e-30 (given with --tolerance) FAIL"),
             qPrintable(o.out));
  }

  // The 3D example job (pp 2 x tp 2 x dp 2 on 8 thread ranks), shortened: it trains, prints
  // the 3D parallel line, the per-rank table and the bubble beside the formula, and --verify
  // finds the single-process run's parameters.
  void gpt3dJobVerifies() {
    const Outcome o = run_cli({"run", "resources/jobs/gpt-3d.json", "--set", "train.steps=8",
                               "--set", "train.log_every=4", "--set", "train.eval_every=0", "--set",
                               "train.eval_batches=1", "--verify"});
    QVERIFY2(o.exit_code == 0, qPrintable(o.out + o.err));
    QVERIFY2(o.out.contains("parallel: pp 2 x tp 2 x dp 2 on 8 ranks"), qPrintable(o.out));
    QVERIFY2(o.out.contains("summary: completed 8 steps"), qPrintable(o.out));
    QVERIFY2(o.out.contains("ledger matches the planner on every rank"), qPrintable(o.out));
    // (p-1)/(m+p-1) with p = 2, m = 4.
    QVERIFY2(o.out.contains("formula (p-1)/(m+p-1) = 20.0%"), qPrintable(o.out));
    QVERIFY2(o.out.contains(" OK"), qPrintable(o.out));
    QVERIFY2(o.out.contains("verify: max_rel_diff="), qPrintable(o.out));
  }

  // Telemetry end to end: `shardlab monitor` on loopback, a real `shardlab run` of 4 mpi ranks
  // streaming to it, the recording replayed, and its Chrome trace (valid JSON, one process per
  // rank) and CSV exported.
  void telemetryMonitorMpiRun() {
    const QString mpirun = QStandardPaths::findExecutable("mpirun");
    if (mpirun.isEmpty()) QSKIP("mpirun not found (apt-get install openmpi-bin)");
    const QString token = tmp_.filePath("monitor.token");
    const QString rec = tmp_.filePath("run.slrec");
    QProcess monitor;
    monitor.setWorkingDirectory(SHARDLAB_SOURCE_DIR);
    // Port 0: the monitor takes a free port and prints it.
    monitor.start(SHARDLAB_CLI,
                  {"monitor", "--listen", "127.0.0.1:0", "--record", rec, "--token-file", token,
                   "--until-done", "--interval", "0.2", "--duration", "120"});
    QVERIFY(monitor.waitForStarted(10000));
    QByteArray first;
    while (!first.contains('\n') && monitor.waitForReadyRead(10000))
      first += monitor.readAllStandardOutput();
    const QRegularExpressionMatch m =
        QRegularExpression("listening on 127\\.0\\.0\\.1:(\\d+)").match(QString::fromUtf8(first));
    QVERIFY2(m.hasMatch(), first.constData());
    const int port = m.captured(1).toInt();
    QVERIFY(port > 0);
    QVERIFY2(QFile::exists(token), "the monitor wrote no token file");
    QProcess run;
    run.setWorkingDirectory(SHARDLAB_SOURCE_DIR);
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("OMPI_ALLOW_RUN_AS_ROOT", "1");
    env.insert("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    env.insert("SHARDLAB_RUNS_DIR", cli_runs_dir());
    run.setProcessEnvironment(env);
    run.start(SHARDLAB_CLI,
              {"run", kMlpJob, "--set", "parallel.backend=mpi", "--set", "parallel.world_size=4",
               "--set", "train.steps=30", "--set", "train.log_every=10", "--set",
               "train.eval_every=0", "--set", "train.eval_batches=1", "--quiet", "--telemetry",
               QString("127.0.0.1:%1").arg(port), "--token-file", token});
    QVERIFY(run.waitForFinished(180000));
    const QString run_out =
        QString::fromUtf8(run.readAllStandardOutput() + run.readAllStandardError());
    QVERIFY2(run.exitCode() == 0, qPrintable(run_out));
    QVERIFY2(monitor.waitForFinished(60000), "the monitor did not see every rank finish");
    const QString mon_out = QString::fromUtf8(first + monitor.readAllStandardOutput());
    const QString mon_err = QString::fromUtf8(monitor.readAllStandardError());
    QVERIFY2(monitor.exitCode() == 0, qPrintable(mon_out + mon_err));
    QVERIFY2(mon_out.contains("4 authenticated"), qPrintable(mon_out + mon_err));

    const Outcome replay = run_cli({"replay", rec});
    QVERIFY2(replay.exit_code == 0, qPrintable(replay.err));
    for (int r = 0; r < 4; ++r)
      QVERIFY2(replay.out.contains(QRegularExpression(QString("^\\s*%1\\s").arg(r),
                                                      QRegularExpression::MultilineOption)),
               qPrintable(replay.out));
    QVERIFY2(replay.out.contains("finished"), qPrintable(replay.out));

    const QString trace = tmp_.filePath("trace.json"), csv = tmp_.filePath("steps.csv");
    const Outcome ex = run_cli({"export", rec, "--chrome-trace", trace, "--csv", csv});
    QVERIFY2(ex.exit_code == 0, qPrintable(ex.err));
    QFile tf(trace);
    QVERIFY(tf.open(QIODevice::ReadOnly));
    QJsonParseError perr;
    const QJsonDocument doc = QJsonDocument::fromJson(tf.readAll(), &perr);
    QVERIFY2(perr.error == QJsonParseError::NoError, qPrintable(perr.errorString()));
    QSet<int> named, sliced;
    for (const QJsonValue& v : doc.object()["traceEvents"].toArray()) {
      const QJsonObject e = v.toObject();
      if (e["ph"].toString() == "M" && e["name"].toString() == "process_name")
        named.insert(e["pid"].toInt());
      if (e["ph"].toString() == "X") sliced.insert(e["pid"].toInt());
    }
    QCOMPARE(named, (QSet<int>{0, 1, 2, 3}));
    QCOMPARE(sliced, (QSet<int>{0, 1, 2, 3}));  // every rank's collectives
    QFile cf(csv);
    QVERIFY(cf.open(QIODevice::ReadOnly));
    const QStringList lines = QString::fromUtf8(cf.readAll()).split('\n', Qt::SkipEmptyParts);
    QCOMPARE(lines.size(), 1 + 4 * 30);  // header + every rank's 30 steps
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

  // The 3D-parallelism bench, quick: one row per pp x tp x dp layout with sane figures (the same
  // loss everywhere: every layout trains on the same global batches), and the bubble table with
  // (p-1)/(v*m+p-1) for every (schedule, p, v, m), recomputed here.
  void benchHybridQuick() {
    const Outcome o = run_cli({"bench", "hybrid", "--quick"}, 300000);
    QVERIFY2(o.exit_code == 0, qPrintable(o.err + o.out));
    QVERIFY2(o.out.contains("threads backend on "), qPrintable(o.out));
    const QStringList layouts{"1x1x1", "1x2x1", "2x1x1", "2x2x2"};
    QMap<QString, QStringList> rows;     // layout -> its cells
    QMap<QString, QStringList> bubbles;  // "sched p v m" -> its cells
    for (const QString& line : o.out.split('\n')) {
      const QStringList cells = line.split(' ', Qt::SkipEmptyParts);
      if (cells.size() == 11 && layouts.contains(cells[0])) {
        QVERIFY2(!rows.contains(cells[0]), qPrintable("two rows for " + cells[0] + "\n" + o.out));
        rows[cells[0]] = cells;
      }
      // sched p v m batch step-ms stage0..stage3 mean formula sim pipe-ms sim-ms
      if (cells.size() == 15 &&
          (cells[0] == "1f1b" || cells[0] == "gpipe" || cells[0] == "interleaved")) {
        const QString key = cells[0] + " " + cells[1] + " " + cells[2] + " " + cells[3];
        QVERIFY2(!bubbles.contains(key), qPrintable("two rows for " + key + "\n" + o.out));
        bubbles[key] = cells;
      }
    }
    QCOMPARE(rows.size(), layouts.size());
    auto num = [](const QString& cell) {
      bool ok = false;
      const double v = cell.toDouble(&ok);
      return ok ? v : std::nan("");
    };
    QCOMPARE(rows["1x1x1"][7], QString("1.00"));  // vs 1x1x1
    for (const QString& l : layouts) {
      const QStringList& c = rows[l];
      const QStringList dims = l.split('x');
      QCOMPARE(num(c[1]), num(dims[0]) * num(dims[1]) * num(dims[2]));  // ranks
      QCOMPARE(c[2], QString(num(dims[0]) > 1 ? "4" : "1"));            // micro-batches
      const double step_ms = num(c[4]), tokens = num(c[6]), loss = num(c[10]);
      QVERIFY2(step_ms > 0 && step_ms < 60000, qPrintable(o.out));
      // batch 32 x context 64 tokens per step
      QVERIFY2(std::abs(tokens - 32.0 * 64.0 / (step_ms / 1e3)) <= 0.01 * tokens + 1,
               qPrintable(o.out));
      QVERIFY2(loss > 0 && std::abs(loss - num(rows["1x1x1"][10])) < 1e-3, qPrintable(o.out));
    }
    QVERIFY2(o.out.contains("pipeline bubble: tp = dp = 1, global batch 16"), qPrintable(o.out));
    // {1f1b, gpipe} x p {2, 4} x m {1, 4}, and interleaved (v = 2) where p divides m: m = 4.
    QCOMPARE(bubbles.size(), 8 + 2);
    for (const char* sched : {"1f1b", "gpipe", "interleaved"})
      for (int p : {2, 4})
        for (int m : {1, 4}) {
          const bool interleaved = QString(sched) == "interleaved";
          if (interleaved && m % p != 0) continue;
          const int v = interleaved ? 2 : 1;
          const QString key = QString("%1 %2 %3 %4").arg(sched).arg(p).arg(v).arg(m);
          QVERIFY2(bubbles.contains(key), qPrintable(key + " missing\n" + o.out));
          const QStringList& c = bubbles[key];
          const QString formula =
              QString::asprintf("%.1f%%", 100.0 * (p - 1) / static_cast<double>(v * m + p - 1));
          QCOMPARE(c[11], formula);
          QCOMPARE(c[12], formula);  // simulate() with uniform op times reproduces it exactly
          for (int s = 0; s < 4; ++s) {
            const QString cell = c[6 + s];
            if (s >= p) {
              QCOMPARE(cell, QString("-"));
              continue;
            }
            QVERIFY2(cell.endsWith('%'), qPrintable(o.out));
            const double v = num(cell.chopped(1));
            QVERIFY2(v >= 0 && v <= 100, qPrintable(key + ": " + cell + "\n" + o.out));
          }
        }
    // Spot checks of the figures themselves: 1/2, 3/7, 1/5, 3/4.
    QCOMPARE(bubbles["1f1b 2 1 1"][11], QString("50.0%"));
    QCOMPARE(bubbles["gpipe 4 1 4"][11], QString("42.9%"));
    QCOMPARE(bubbles["1f1b 2 1 4"][11], QString("20.0%"));
    QCOMPARE(bubbles["gpipe 4 1 1"][11], QString("75.0%"));
    QCOMPARE(bubbles["interleaved 2 2 4"][11], QString("11.1%"));  // 1/9
    QCOMPARE(bubbles["interleaved 4 2 4"][11], QString("27.3%"));  // 3/11
  }

  // The telemetry bench, quick: the three ingest rows (decode alone, a counting consumer, a
  // RunModel) with positive rates, then one off/on pair of the demo job that delivered every
  // event it sent, and the overhead line.
  void benchTelemetryQuick() {
    const Outcome o = run_cli({"bench", "telemetry", "--quick"}, 300000);
    QVERIFY2(o.exit_code == 0, qPrintable(o.err + o.out));
    QVERIFY2(o.out.contains("ingest: 200000 STEP events"), qPrintable(o.out));
    auto num = [](const QString& cell) {
      bool ok = false;
      const double v = cell.toDouble(&ok);
      return ok ? v : std::nan("");
    };
    QMap<QString, QStringList> ingest, runs;  // label -> cells; "off"/"on" -> cells
    for (const QString& line : o.out.split('\n')) {
      const QStringList cells = line.split(' ', Qt::SkipEmptyParts);
      if (cells.size() >= 4 &&
          (cells[0] == "decode-only" || cells[0] == "count" || cells[0] == "run-model")) {
        QVERIFY2(!ingest.contains(cells[0]), qPrintable("two rows for " + cells[0] + "\n" + o.out));
        ingest[cells[0]] = cells;
      }
      // run telemetry train-s published sent dropped received
      if (cells.size() == 7 && cells[0] == "1" && (cells[1] == "off" || cells[1] == "on"))
        runs[cells[1]] = cells;
    }
    QCOMPARE(ingest.size(), 3);
    for (const QStringList& c : ingest) {
      const double events_per_s = num(c[1]), mb_per_s = num(c[2]), seconds = num(c[3]);
      QVERIFY2(events_per_s > 1000 && mb_per_s > 0 && seconds > 0, qPrintable(o.out));
      // seconds is printed to the millisecond
      QVERIFY2(std::abs(events_per_s * seconds - 200000) <= events_per_s * 0.0005 + 1,
               qPrintable(o.out));
    }
    QCOMPARE(runs.size(), 2);
    QVERIFY2(num(runs["off"][2]) > 0 && num(runs["on"][2]) > 0, qPrintable(o.out));
    const QStringList& on = runs["on"];
    QVERIFY2(num(on[4]) > 0, qPrintable(o.out));  // sent
    QCOMPARE(on[5], QString("0"));                // dropped
    QCOMPARE(on[6], on[4]);                       // received == sent
    QVERIFY2(
        o.out.contains(QRegularExpression(
            R"(median train seconds: off \d+\.\d{3}, on \d+\.\d{3}; telemetry overhead [+-]\d+\.\d%)")),
        qPrintable(o.out));
    QVERIFY2(o.out.contains("0 sent but not received"), qPrintable(o.out));
  }

  // Checkpoints end to end: a sharded run saves them, `checkpoint inspect` shows the step and
  // every shard, a run resumes from one, and a damaged shard is one line naming the file.
  void checkpointsSaveInspectResume() {
    const QString dir = tmp_.filePath("ck");
    const QStringList job =
        mlp_job_args({"parallel.world_size=2", "train.steps=4", "train.log_every=2",
                      "train.eval_every=0", "train.eval_batches=1"});
    Outcome o = run_cli(
        QStringList{"run"} + job +
        QStringList{"--set", "train.checkpoint_dir=" + dir, "--set", "train.checkpoint_every=2"});
    QVERIFY2(o.exit_code == 0, qPrintable(o.out + o.err));
    QVERIFY2(o.out.contains("checkpoint: step 2 saved to " + dir + "/step-00000002"),
             qPrintable(o.out));
    QVERIFY2(o.out.contains("checkpoint: step 4 saved to"), qPrintable(o.out));

    o = run_cli({"checkpoint", "inspect", dir});
    QVERIFY2(o.exit_code == 0, qPrintable(o.out + o.err));
    QVERIFY2(o.out.contains("checkpoint step 4"), qPrintable(o.out));
    QVERIFY2(o.out.contains("strategy: zero2"), qPrintable(o.out));
    QVERIFY2(o.out.contains("shard-00000.bin") && o.out.contains("shard-00001.bin"),
             qPrintable(o.out));
    QVERIFY2(o.out.contains("verified: 2 shards"), qPrintable(o.out));

    o = run_cli(QStringList{"run"} + job + QStringList{"--resume", dir + "/step-00000002"});
    QVERIFY2(o.exit_code == 0, qPrintable(o.out + o.err));
    QVERIFY2(o.out.contains("resume: step 2 of " + dir + "/step-00000002"), qPrintable(o.out));
    QVERIFY2(o.out.contains("step      4/4") && !o.out.contains("step      2/4"),
             qPrintable(o.out));
    QVERIFY2(o.out.contains("summary: completed 4 steps"), qPrintable(o.out));

    const QString shard = dir + "/step-00000004/shard-00001.bin";
    {
      QFile f(shard);
      QVERIFY(f.open(QIODevice::ReadWrite));
      f.seek(64);
      char c = 0;
      f.getChar(&c);
      f.seek(64);
      f.putChar(static_cast<char>(c ^ 1));
    }
    o = run_cli({"checkpoint", "inspect", dir});
    QCOMPARE(o.exit_code, 1);
    QVERIFY2(o.err.startsWith("shardlab: error: " + shard + ": checksum mismatch"),
             qPrintable(o.err));
    QCOMPARE(o.err.count('\n'), 1);
    o = run_cli(QStringList{"run"} + job + QStringList{"--resume", dir});
    QCOMPARE(o.exit_code, 1);
    QVERIFY2(o.err.startsWith("shardlab: error: " + shard + ": checksum mismatch"),
             qPrintable(o.err));
    QCOMPARE(o.err.count('\n'), 1);
    QVERIFY2(!o.out.contains("step      3/4"), qPrintable(o.out));

    o = run_cli(QStringList{"run"} + job + QStringList{"--resume", tmp_.filePath("none")});
    QCOMPARE(o.exit_code, 1);
    QCOMPARE(o.err,
             "shardlab: error: " + tmp_.filePath("none") + ": no such checkpoint directory\n");
  }

  // Resharding and consolidation from the CLI: a ZeRO-2 checkpoint of 2 ranks resumes as FSDP on
  // 3 (the resume line says so), `checkpoint consolidate` writes the same model file as the run's
  // own --save-model (gathered through the optimizer, not the shards), refuses to overwrite it
  // without --force, and a job starts from it with train.init_model.
  void checkpointsConsolidateAndReshard() {
    const QString dir = tmp_.filePath("ck-cons");
    const QString saved = tmp_.filePath("saved.slm"), cons = tmp_.filePath("cons.slm");
    const QStringList job = mlp_job_args(
        {"parallel.world_size=2", "train.steps=3", "train.eval_every=0", "train.eval_batches=1"});
    Outcome o = run_cli(QStringList{"run"} + job +
                        QStringList{"--set", "train.checkpoint_dir=" + dir, "--save-model", saved});
    QVERIFY2(o.exit_code == 0, qPrintable(o.out + o.err));
    o = run_cli({"checkpoint", "consolidate", dir, cons});
    QVERIFY2(o.exit_code == 0, qPrintable(o.out + o.err));
    QVERIFY2(o.out.contains("consolidated step 3 of " + dir + "/step-00000003 (zero2 on 2 ranks"),
             qPrintable(o.out));
    QFile a(saved), b(cons);
    QVERIFY(a.open(QIODevice::ReadOnly) && b.open(QIODevice::ReadOnly));
    const QByteArray bytes = b.readAll();
    QVERIFY(bytes.size() > 100000);
    QVERIFY2(a.readAll() == bytes, "consolidated model differs from the run's --save-model");
    o = run_cli({"checkpoint", "consolidate", dir, cons});
    QCOMPARE(o.exit_code, 1);
    QCOMPARE(o.err,
             "shardlab: error: consolidate: " + cons + " exists; pass --force to replace it\n");
    o = run_cli({"checkpoint", "consolidate", dir, cons, "--force"});
    QVERIFY2(o.exit_code == 0, qPrintable(o.out + o.err));

    o = run_cli(QStringList{"run"} + job +
                QStringList{"--set", "parallel.strategy=fsdp", "--set", "parallel.world_size=3",
                            "--set", "train.batch_size=" + QString::number(64), "--set",
                            "train.steps=5", "--resume", dir});
    // The job's batch is 64 (divisible by 2 and... not by 3): refused before any step, naming it.
    QCOMPARE(o.exit_code, 1);
    QVERIFY2(o.err.contains("train.batch_size"), qPrintable(o.err));
    o = run_cli(QStringList{"run"} + job +
                QStringList{"--set", "parallel.strategy=fsdp", "--set", "parallel.world_size=4",
                            "--set", "train.steps=5", "--resume", dir});
    QVERIFY2(o.exit_code == 0, qPrintable(o.out + o.err));
    QVERIFY2(o.out.contains("resume: step 3 of " + dir +
                            "/step-00000003 (zero2 on 2 ranks, "
                            "1x1x2), resharded to fsdp on 4 ranks (1x1x4)"),
             qPrintable(o.out));
    QVERIFY2(o.out.contains("step      5/5") && !o.out.contains("step      3/5"),
             qPrintable(o.out));

    o = run_cli({"run", kMlpJob, "--set", "parallel.strategy=none", "--set",
                 "parallel.world_size=1", "--set", "train.steps=1", "--set", "train.eval_every=0",
                 "--set", "train.init_model=" + tmp_.filePath("missing.slm"), "--no-record"});
    QCOMPARE(o.exit_code, 1);
    QCOMPARE(o.err, "shardlab: error: cannot read model file " + tmp_.filePath("missing.slm") +
                        ": no such file\n");
    // One process from the consolidated model: its first loss is not the seeded model's.
    const QStringList single{"run",        kMlpJob,
                             "--set",      "parallel.strategy=none",
                             "--set",      "parallel.world_size=1",
                             "--set",      "train.steps=1",
                             "--set",      "train.eval_every=0",
                             "--set",      "train.log_every=1",
                             "--no-record"};
    const QRegularExpression loss("step +1/1 +epoch +0 +loss ([0-9.]+)");
    o = run_cli(single + QStringList{"--set", "train.init_model=" + cons});
    QVERIFY2(o.exit_code == 0, qPrintable(o.out + o.err));
    const QString from_model = loss.match(o.out).captured(1);
    o = run_cli(single);
    QVERIFY2(o.exit_code == 0, qPrintable(o.out + o.err));
    const QString from_seed = loss.match(o.out).captured(1);
    QVERIFY2(!from_model.isEmpty() && !from_seed.isEmpty() && from_model != from_seed,
             qPrintable(from_model + " vs " + from_seed));
  }

  // A job for the GPU: every strategy and the 3D layout, with checkpoints and over mpi, pass
  // validation and then stop, where no GPU is usable, only for want of one, with one line and
  // before any data is read. Where one is usable, a 2-step strategy-none run trains on it and
  // names it.
  void deviceCudaStopsBeforeStarting() {
    Outcome o;
    o = run_cli({"run", kMlpJob, "--set", "device=cuda", "--set", "parallel={}", "--set",
                 "train.steps=2", "--set", "train.log_every=1", "--set", "train.eval_batches=1",
                 "--no-record"});
    QCOMPARE(o.status, QProcess::NormalExit);
    const bool gpu = o.exit_code == 0;
    if (gpu) {
      QVERIFY2(o.out.contains("device: cuda:0 "), qPrintable(o.out));
      QVERIFY2(o.out.contains("summary:"), qPrintable(o.out));
      QVERIFY2(o.out.contains("2 steps"), qPrintable(o.out));
    } else {
      QCOMPARE(o.exit_code, 1);
      QVERIFY2(o.err.startsWith("shardlab: error: device: "), qPrintable(o.err));
      QVERIFY2(o.err.contains("cuda needs a usable GPU") ||
                   o.err.contains("this shardlab was built without the CUDA kernels"),
               qPrintable(o.err));
      QVERIFY2(o.err.contains("--set device=cpu"), qPrintable(o.err));
      QCOMPARE(o.err.count('\n'), 1);
      QVERIFY2(!o.out.contains("data:") && !o.out.contains("step "), qPrintable(o.out));
    }
    if (!gpu) {
      const QString ckpt = "train.checkpoint_dir=" + tmp_.filePath("ckpt");
      const std::vector<QStringList> jobs = {
          {kMlpJob},  // zero2
          {kMlpJob, "--set", "parallel.strategy=ddp", "--set", ckpt},
          {kMlpJob, "--set", "parallel.strategy=zero1", "--set", "parallel.backend=mpi"},
          {kMlpJob, "--set", "parallel.strategy=fsdp", "--set", ckpt},
          {"resources/jobs/gpt-3d.json", "--set", ckpt},
      };
      for (const QStringList& job : jobs) {
        o = run_cli(QStringList{"run"} + job + QStringList{"--set", "device=cuda", "--no-record"});
        QCOMPARE(o.exit_code, 1);
        QVERIFY2(o.err.startsWith("shardlab: error: device: "), qPrintable(o.err));
        QVERIFY2(o.err.contains("cuda needs a usable GPU") ||
                     o.err.contains("this shardlab was built without the CUDA kernels"),
                 qPrintable(job.join(' ') + ": " + o.err));
        QVERIFY2(o.err.contains("--set device=cpu"), qPrintable(o.err));
        QCOMPARE(o.err.count('\n'), 1);
        QVERIFY2(!o.out.contains("data:") && !o.out.contains("step "), qPrintable(o.out));
      }
    }
  }

  // `bench model --device cuda`: without a usable GPU one line and exit status 1, before any job
  // is read; with one, the GPU's samples/s and tokens/s. --device tpu is a usage error.
  void benchModelCuda() {
    Outcome o = run_cli({"bench", "model", "--device", "cuda", "--steps", "2"});
    QCOMPARE(o.status, QProcess::NormalExit);
    if (o.exit_code == 0) {
      QVERIFY2(o.out.contains(QRegularExpression(R"(^fashion_mlp .* cuda \d+ samples/s$)",
                                                 QRegularExpression::MultilineOption)),
               qPrintable(o.out));
      QVERIFY2(o.out.contains(QRegularExpression(R"(^chars_gpt .* cuda \d+ tokens/s$)",
                                                 QRegularExpression::MultilineOption)),
               qPrintable(o.out));
    } else {
      QCOMPARE(o.exit_code, 1);
      QCOMPARE(o.err.count('\n'), 1);
      QVERIFY2(o.err.startsWith("shardlab: error: bench model --device cuda: "), qPrintable(o.err));
      QVERIFY2(o.out.isEmpty(), qPrintable(o.out));
    }
    o = run_cli({"bench", "model", "--device", "tpu"});
    QCOMPARE(o.exit_code, 2);
    QVERIFY2(o.err.startsWith("shardlab: --device: unknown device 'tpu'"), qPrintable(o.err));
  }

  // `bench optimizer --device cuda`: where it cannot run (no usable GPU, or a build without the
  // CUDA kernels) one line naming the device problem and exit status 1; on a GPU, the table with
  // the copy yardstick and an adam row with its fraction of the copy bandwidth. --device tpu is a
  // usage error.
  void benchOptimizerCuda() {
    Outcome o = run_cli({"bench", "optimizer", "--device", "cuda", "--params", "1048576", "--reps",
                         "3", "--optimizers", "adam,sgd"});
    QCOMPARE(o.status, QProcess::NormalExit);
    if (o.exit_code == 0) {
      QVERIFY2(o.out.contains("(copy)"), qPrintable(o.out));
      static const QRegularExpression adam(R"(^adam\s+defaults\s+28\s.*\s\d+%$)",
                                           QRegularExpression::MultilineOption);
      QVERIFY2(adam.match(o.out).hasMatch(), qPrintable(o.out));
      QVERIFY2(o.out.contains(QRegularExpression(R"(^adam\s+bf16 master\s+30\s.*%$)",
                                                 QRegularExpression::MultilineOption)),
               qPrintable(o.out));
      QVERIFY2(o.out.contains(QRegularExpression(R"(^sgd\s+momentum=0.9\s+20\s.*%$)",
                                                 QRegularExpression::MultilineOption)),
               qPrintable(o.out));
    } else {
      QCOMPARE(o.exit_code, 1);
      QCOMPARE(o.err.count('\n'), 1);
      QVERIFY2(o.err.startsWith("shardlab: error: bench optimizer --device cuda: "),
               qPrintable(o.err));
      QVERIFY2(o.err.contains("no usable GPU: ") ||
                   o.err.contains("this shardlab was built without the CUDA kernels"),
               qPrintable(o.err));
      QVERIFY2(o.out.isEmpty(), qPrintable(o.out));
    }

    o = run_cli({"bench", "optimizer", "--device", "tpu"});
    QCOMPARE(o.status, QProcess::NormalExit);
    QCOMPARE(o.exit_code, 2);
    QVERIFY2(
        o.err.section('\n', 0, 0).contains("--device: unknown device 'tpu' (known: cpu, cuda)"),
        qPrintable(o.err));
  }

  // The same with 2 mpi ranks (`shardlab run` starting workers with --resume): the resumed run
  // ends with the straight run's evaluation, digit for digit.
  void checkpointsMpiResume() {
    if (QStandardPaths::findExecutable("mpirun").isEmpty())
      QSKIP("mpirun not found (apt-get install openmpi-bin)");
    const QString dir = tmp_.filePath("ck-mpi");
    const QStringList job =
        mlp_job_args({"parallel.strategy=fsdp", "parallel.world_size=2", "parallel.backend=mpi",
                      "train.steps=4", "train.eval_every=0", "train.eval_batches=1"});
    Outcome a = run_cli(
        QStringList{"run"} + job +
        QStringList{"--set", "train.checkpoint_dir=" + dir, "--set", "train.checkpoint_every=2"});
    QVERIFY2(a.exit_code == 0, qPrintable(a.out + a.err));
    QVERIFY2(a.out.contains("checkpoint: step 2 saved to " + dir + "/step-00000002"),
             qPrintable(a.out));
    Outcome b = run_cli(QStringList{"run"} + job + QStringList{"--resume", dir + "/step-00000002"});
    QVERIFY2(b.exit_code == 0, qPrintable(b.out + b.err));
    QCOMPARE(b.out.count("resume: step 2 of "), 1);  // rank 0 prints it
    const QRegularExpression eval("eval loss [0-9.]+");
    const QString ea = eval.match(a.out).captured(0), eb = eval.match(b.out).captured(0);
    QVERIFY2(!ea.isEmpty() && ea == eb, qPrintable(a.out + "\n---\n" + b.out));
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
