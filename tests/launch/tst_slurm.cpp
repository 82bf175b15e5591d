// ShardLab under Slurm, for real: a one-node cluster in a temporary folder (slurmctld and slurmd
// started here on free loopback ports, auth/none, so a Slurm of the host is not disturbed), then
// the srun line the app shows for remote workers (launch::srun_argv, the one builder of both)
// training 4 ranks that stream to `shardlab monitor` and check their model against one process
// (--verify); srun without PMIx, and a worker started alone where SLURM_NTASKS says 4, must each
// fail with one line saying how to launch. Facts about this Slurm: shared/notes/real-parts.md.
#include <QtTest>

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QProcess>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QThread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <string>
#include <vector>

#include "engine/launch/workers.h"
#include "tests/common/monitor_process.h"

namespace {

const QString kJob = QStringLiteral(SHARDLAB_SOURCE_DIR "/resources/jobs/fashion_mlp.json");

// A free TCP port on loopback (bound, read, released: Slurm's daemons take it a moment later).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

QString tail(const QString& path, int lines = 15) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) return path + ": (none)";
  const QStringList all = QString::fromUtf8(f.readAll()).split('\n', Qt::SkipEmptyParts);
  return path + ":\n" + all.mid(std::max<qsizetype>(0, all.size() - lines)).join('\n');
}

// This process's environment without anything of an outer Slurm job or MPI launch (srun would
// otherwise join that job), OpenMPI allowed to run as root, no telemetry token.
QProcessEnvironment clean_env() {
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  for (const QString& k : env.keys())
    if (k.startsWith("SLURM_") || k.startsWith("OMPI_") || k.startsWith("PMIX_") ||
        k.startsWith("PMI_"))
      env.remove(k);
  env.insert("OMPI_ALLOW_RUN_AS_ROOT", "1");
  env.insert("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
  env.remove("SHARDLAB_TELEMETRY_TOKEN");
  return env;
}

// Runs `program args` to its end (at most `ms`); false when it did not end in time (then killed).
bool run_to_end(QProcess& p, const QString& program, const QStringList& args, int ms) {
  p.start(program, args);
  if (!p.waitForStarted(10000)) return false;
  if (p.waitForFinished(ms)) return true;
  p.kill();
  p.waitForFinished(5000);
  return false;
}

// A one-node cluster: slurm.conf, state, spool and logs in `dir`; stopped by its daemons' PIDs.
class Cluster {
 public:
  explicit Cluster(const QString& dir) : dir_(dir) {}
  ~Cluster() { stop(); }

  // "" when the node is idle, else why not (with the logs' tails).
  QString start() {
    for (const char* tool : {"slurmctld", "slurmd", "srun", "sinfo", "scancel"}) {
      const QString path = QStandardPaths::findExecutable(tool, {"/usr/sbin", "/usr/bin"});
      if (path.isEmpty())
        return QString("%1 not found (apt-get install slurmctld slurmd slurm-client)").arg(tool);
      tools_[tool] = path;
    }
    const int ctld_port = free_port(), d_port = free_port();
    if (ctld_port == 0 || d_port == 0 || ctld_port == d_port) return "no free loopback ports";
    QDir().mkpath(dir_ + "/state");
    QDir().mkpath(dir_ + "/spool");
    QFile conf(this->conf());
    if (!conf.open(QIODevice::WriteOnly)) return "cannot write " + this->conf();
    conf.write(QString("ClusterName=shardlabtest\n"
                       "SlurmctldHost=localhost\n"
                       "SlurmctldPort=%1\n"
                       "SlurmdPort=%2\n"
                       "SlurmUser=root\n"
                       "SlurmdUser=root\n"
                       "AuthType=auth/none\n"
                       "CredType=cred/none\n"
                       "StateSaveLocation=%3/state\n"
                       "SlurmdSpoolDir=%3/spool\n"
                       "SlurmctldPidFile=%3/slurmctld.pid\n"
                       "SlurmdPidFile=%3/slurmd.pid\n"
                       "SlurmctldLogFile=%3/slurmctld.log\n"
                       "SlurmdLogFile=%3/slurmd.log\n"
                       "ProctrackType=proctrack/linuxproc\n"
                       "TaskPlugin=task/none\n"
                       "SelectType=select/cons_tres\n"
                       "SelectTypeParameters=CR_Core\n"
                       "AccountingStorageType=accounting_storage/none\n"
                       "JobCompType=jobcomp/none\n"
                       "JobAcctGatherType=jobacct_gather/none\n"
                       "MpiDefault=pmix\n"
                       "MailProg=/bin/true\n"
                       "ReturnToService=2\n"
                       "SlurmdParameters=config_overrides\n"
                       "NodeName=localhost NodeAddr=127.0.0.1 CPUs=8 State=UNKNOWN\n"
                       "PartitionName=debug Nodes=localhost Default=YES State=UP "
                       "OverSubscribe=FORCE:4\n")
                   .arg(ctld_port)
                   .arg(d_port)
                   .arg(dir_)
                   .toUtf8());
    conf.close();
    for (QProcess* p : {&ctld_, &slurmd_}) {
      p->setProcessChannelMode(QProcess::MergedChannels);
      p->setProcessEnvironment(env());
    }
    ctld_.setStandardOutputFile(dir_ + "/slurmctld.out");
    slurmd_.setStandardOutputFile(dir_ + "/slurmd.out");
    ctld_.start(tools_["slurmctld"], {"-D", "-f", this->conf()});
    slurmd_.start(tools_["slurmd"], {"-D", "-f", this->conf(), "-N", "localhost"});
    if (!ctld_.waitForStarted(10000) || !slurmd_.waitForStarted(10000))
      return "the daemons did not start\n" + logs();
    // The node reports idle about a second after both are up.
    QElapsedTimer t;
    t.start();
    QString state;
    while (t.elapsed() < 30000) {
      if (ctld_.state() == QProcess::NotRunning || slurmd_.state() == QProcess::NotRunning)
        return "a daemon exited\n" + logs();
      QProcess sinfo;
      sinfo.setProcessEnvironment(env());
      if (run_to_end(sinfo, tools_["sinfo"], {"-h", "-N", "-o", "%t"}, 10000)) {
        state = QString::fromUtf8(sinfo.readAllStandardOutput()).trimmed();
        if (state == "idle") return {};
      }
      QThread::msleep(200);
    }
    return QString("the node is not idle after 30 s (sinfo: '%1')\n").arg(state) + logs();
  }

  // Cancels what is left of this cluster's jobs, then SIGTERM to each daemon it started, SIGKILL
  // after 5 s.
  void stop() {
    if (ctld_.state() != QProcess::NotRunning && !tools_["scancel"].isEmpty()) {
      QProcess scancel;
      scancel.setProcessEnvironment(env());
      run_to_end(scancel, tools_["scancel"], {"--user", "root"}, 10000);
    }
    for (QProcess* p : {&slurmd_, &ctld_}) {
      if (p->state() == QProcess::NotRunning) continue;
      ::kill(static_cast<pid_t>(p->processId()), SIGTERM);
      if (!p->waitForFinished(5000)) {
        ::kill(static_cast<pid_t>(p->processId()), SIGKILL);
        p->waitForFinished(5000);
      }
    }
  }

  QString conf() const { return dir_ + "/slurm.conf"; }
  QProcessEnvironment env() const {
    QProcessEnvironment e = clean_env();
    e.insert("SLURM_CONF", conf());
    return e;
  }
  QString logs() const {
    return tail(dir_ + "/slurmctld.log") + "\n" + tail(dir_ + "/slurmd.log") + "\n" +
           tail(dir_ + "/slurmctld.out", 5) + "\n" + tail(dir_ + "/slurmd.out", 5);
  }

 private:
  QString dir_;
  QProcess ctld_, slurmd_;
  QHash<QString, QString> tools_;
};

// The workers of the 4-rank job, as the app's remote mode describes them.
shardlab::launch::WorkerCommand workers(int world) {
  shardlab::launch::WorkerCommand w;
  w.program = SHARDLAB_CLI;
  w.job_file = kJob.toStdString();
  w.sets = {"train.steps=30", "train.eval_every=0", "parallel.backend=mpi",
            "parallel.strategy=zero2", "parallel.world_size=" + std::to_string(world)};
  w.quiet = true;
  return w;
}

QStringList args_of(const std::vector<std::string>& argv) {
  QStringList out;
  for (size_t i = 1; i < argv.size(); ++i) out << QString::fromStdString(argv[i]);
  return out;
}

}  // namespace

class TestSlurm : public QObject {
  Q_OBJECT

  QTemporaryDir tmp_;
  std::unique_ptr<Cluster> cluster_;
  QString why_not_;  // why the cluster is not there ("" when it is)

 private slots:
  void initTestCase() {
    QVERIFY(tmp_.isValid());
    QElapsedTimer t;
    t.start();
    cluster_ = std::make_unique<Cluster>(tmp_.filePath("slurm"));
    why_not_ = cluster_->start();
    qInfo("cluster: %s in %lld ms", why_not_.isEmpty() ? "up" : "not up", t.elapsed());
  }
  void cleanupTestCase() { cluster_.reset(); }

  // The one command a user types under Slurm: 4 ranks of one MPI world (PMIx), streaming to a
  // monitor until every rank has finished, and the model equal to one process's.
  void srunTrainsFourRanks() {
    if (!why_not_.isEmpty()) QSKIP(qPrintable("no Slurm cluster: " + why_not_));
    shardlab::test::MonitorProcess monitor(tmp_.filePath("monitor"));
    QDir().mkpath(tmp_.filePath("monitor"));
    QVERIFY2(monitor.start(0.25, 120, clean_env()), qPrintable(monitor.output()));
    shardlab::launch::WorkerCommand w = workers(4);
    w.telemetry = monitor.address().toStdString();
    w.token_file = monitor.token().toStdString();
    w.verify = true;
    const std::vector<std::string> argv = shardlab::launch::srun_argv(w, 4);
    QCOMPARE(QString::fromStdString(shardlab::launch::remote_command(w, 4, true)),
             QString::fromStdString(shardlab::launch::shell_line(argv)));
    qInfo("%s", shardlab::launch::shell_line(argv).c_str());
    QElapsedTimer t;
    t.start();
    QProcess srun;
    srun.setProcessEnvironment(cluster_->env());
    srun.setProcessChannelMode(QProcess::MergedChannels);
    srun.setWorkingDirectory(tmp_.path());
    srun.start(QString::fromStdString(argv[0]), args_of(argv));
    QVERIFY(srun.waitForStarted(10000));
    while (srun.state() != QProcess::NotRunning && t.elapsed() < 90000) {
      srun.waitForFinished(50);
      monitor.poll(50);
    }
    if (srun.state() != QProcess::NotRunning) {
      srun.kill();
      srun.waitForFinished(5000);
      QFAIL(qPrintable("srun did not end in 90 s\n" + QString::fromUtf8(srun.readAll()) + "\n" +
                       cluster_->logs()));
    }
    const QString out = QString::fromUtf8(srun.readAll());
    qInfo("srun ended after %lld ms", t.elapsed());
    QVERIFY2(srun.exitStatus() == QProcess::NormalExit && srun.exitCode() == 0,
             qPrintable(out + "\n" + cluster_->logs()));
    // Rank 0's summary and its comparison with one process (engine/cli/verify.h).
    static const QRegularExpression verified("^verify: max_rel_diff=\\S+ tolerance=.* OK$",
                                             QRegularExpression::MultilineOption);
    const QRegularExpressionMatch verify_line = verified.match(out);
    QVERIFY2(verify_line.hasMatch(), qPrintable(out));
    qInfo("%s", qPrintable(verify_line.captured(0)));
    QVERIFY2(monitor.wait_done(20000), qPrintable(monitor.output()));
    const QString table = monitor.last_table();
    static const QRegularExpression row("^\\s*(\\d+)\\s+pp0 tp0 dp\\d+\\s+(\\S+)\\s+(\\d+)",
                                        QRegularExpression::MultilineOption);
    QSet<int> finished;
    for (auto it = row.globalMatch(table); it.hasNext();) {
      const auto m = it.next();
      QVERIFY2(m.captured(2) == "finished" && m.captured(3) == "30", qPrintable(table));
      finished.insert(m.captured(1).toInt());
    }
    QCOMPARE(finished, (QSet<int>{0, 1, 2, 3}));
    QVERIFY2(monitor.output().contains("4 authenticated"), qPrintable(monitor.output()));
    QVERIFY(QFileInfo(monitor.recording()).size() > 1000);
  }

  // srun without PMIx: every task stops before MPI_Init with one line saying how to launch.
  void srunWithoutPmixSaysHowToLaunch() {
    if (!why_not_.isEmpty()) QSKIP(qPrintable("no Slurm cluster: " + why_not_));
    std::vector<std::string> argv = shardlab::launch::srun_argv(workers(2), 2);
    QCOMPARE(argv[1], std::string("--mpi=pmix"));
    argv[1] = "--mpi=none";
    // Each task's stderr in its own file (%t: the task number).
    const QString err = tmp_.filePath("nopmix-%t.err");
    argv.insert(argv.begin() + 1, {"--error", err.toStdString()});
    QProcess srun;
    srun.setProcessEnvironment(cluster_->env());
    srun.setWorkingDirectory(tmp_.path());
    QElapsedTimer t;
    t.start();
    QVERIFY(run_to_end(srun, QString::fromStdString(argv[0]), args_of(argv), 60000));
    const QString out =
        QString::fromUtf8(srun.readAllStandardOutput() + srun.readAllStandardError());
    qInfo("srun --mpi=none ended after %lld ms with %d", t.elapsed(), srun.exitCode());
    QVERIFY2(srun.exitCode() != 0, qPrintable(out));
    for (int task = 0; task < 2; ++task) {
      QFile f(QString(err).replace("%t", QString::number(task)));
      QVERIFY2(f.open(QIODevice::ReadOnly), qPrintable(out));
      const QString text = QString::fromUtf8(f.readAll());
      QVERIFY2(text.count('\n') == 1 && text.endsWith('\n'), qPrintable(text));
      QVERIFY2(text.startsWith("shardlab: error: srun started this task without PMIx "
                               "(SLURM_NTASKS=2, no PMIX_RANK)"),
               qPrintable(text));
      QVERIFY2(text.contains("launch with srun --mpi=pmix -n 2 "), qPrintable(text));
    }
    // Each task exited 65 (a rejected launch: not worth a restart, mpirun.h), and so does srun.
    QCOMPARE(srun.exitCode(), 65);
    // srun reports tasks that end in the same poll together ("tasks 0-1: ..."), others one by
    // one (seen under a loaded machine): either way, each of the two with 65.
    QVERIFY2(out.contains("tasks 0-1: Exited with exit code 65") ||
                 (out.contains("task 0: Exited with exit code 65") &&
                  out.contains("task 1: Exited with exit code 65")),
             qPrintable(out));
  }

  // No Slurm needed: a worker started alone (a world of 1) where SLURM_NTASKS says 4, as in a
  // batch script that forgot srun.
  void workerAloneWhereSlurmSaysFour() {
    QProcess worker;
    QProcessEnvironment env = clean_env();
    env.insert("SLURM_NTASKS", "4");
    worker.setProcessEnvironment(env);
    worker.setWorkingDirectory(tmp_.path());
    std::vector<std::string> argv = shardlab::launch::worker_argv(workers(4));
    QVERIFY(run_to_end(worker, QString::fromStdString(argv[0]), args_of(argv), 60000));
    const QString err = QString::fromUtf8(worker.readAllStandardError());
    QCOMPARE(worker.exitCode(), 65);  // a rejected launch is not worth a restart (mpirun.h)
    QVERIFY2(err.count('\n') == 1, qPrintable(err));
    QVERIFY2(err.startsWith("shardlab: error: MPI says this is a world of 1 but SLURM_NTASKS=4: "),
             qPrintable(err));
    QVERIFY2(err.contains("srun --mpi=pmix -n 4 ") && err.contains("mpirun -np 4 "),
             qPrintable(err));
  }
};

QTEST_GUILESS_MAIN(TestSlurm)
#include "tst_slurm.moc"
