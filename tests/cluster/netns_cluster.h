// The test cluster of tests/cluster/netns_cluster.sh from a Qt Test suite: K hosts h0..h{K-1} on
// network namespaces, made in the constructor and removed in the destructor (and by the script's
// guardian when this process dies any other way). Every program of a test runs on a host through
// start()/run(); mpirun started on h0 reaches the others through the script's ssh stand-in, set in
// mpi_env() the way a site sets its own launcher (OMPI_MCA_* in the environment).
#pragma once

#include <QFile>
#include <QProcess>
#include <QProcessEnvironment>
#include <QStandardPaths>
#include <QString>
#include <QStringList>
#include <QtTest>

#include <unistd.h>

#include "tests/common/process.h"

namespace shardlab::test {

class NetnsCluster {
 public:
  explicit NetnsCluster(int hosts) : hosts_(hosts) {
    // Unique per test process: parallel suites never share a name or a subnet.
    name_ = "c" + QString::number(static_cast<qlonglong>(getpid()), 36);
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("SHARDLAB_CLUSTER_OWNER", QString::number(getpid()));
    ProcessOptions o;
    o.env = env;
    o.timeout_ms = 30000;
    const ProcessOutcome up = run_process(script(), {"up", name_, QString::number(hosts)}, o);
    if (up.exit_code == 77) {
      skip_ = up.err.trimmed();
      return;
    }
    if (up.exit_code != 0) {
      error_ = "netns_cluster.sh up failed: " + up.err;
      return;
    }
    subnet_ = up.out.trimmed();
  }
  ~NetnsCluster() {
    if (!subnet_.isEmpty()) run_process(script(), {"down", name_}, {});
  }
  NetnsCluster(const NetnsCluster&) = delete;
  NetnsCluster& operator=(const NetnsCluster&) = delete;

  static QString script() {
    return QStringLiteral(SHARDLAB_SOURCE_DIR "/tests/cluster/netns_cluster.sh");
  }

  bool ok() const { return !subnet_.isEmpty(); }
  QString skip_reason() const { return skip_; }  // "" unless it cannot run here
  QString error() const { return error_; }
  QString name() const { return name_; }
  int hosts() const { return hosts_; }
  QString address(int host) const { return subnet_ + "." + QString::number(10 + host); }
  QString cidr() const { return subnet_ + ".0/24"; }
  QString agent() const { return "/run/shardlab-test-cluster/" + name_ + "/agent"; }

  // The environment for programs on the hosts: mpirun as root, its ssh stand-in, the test
  // subnet for its daemons and TCP transport, and yielding when idle (a 2-core machine runs
  // several ranks per core).
  QProcessEnvironment mpi_env() const {
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("OMPI_ALLOW_RUN_AS_ROOT", "1");
    env.insert("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    env.insert("OMPI_MCA_plm_rsh_agent", agent());
    env.insert("OMPI_MCA_oob_tcp_if_include", cidr());
    env.insert("OMPI_MCA_btl_tcp_if_include", cidr());
    env.insert("OMPI_MCA_mpi_yield_when_idle", "1");
    env.insert("OPENBLAS_NUM_THREADS", "1");
    return env;
  }

  // {script, exec, NAME, I, program, args...}: run `program` on host I.
  QStringList on_host(int host, const QString& program, const QStringList& args) const {
    return QStringList{"exec", name_, QString::number(host), program} + args;
  }
  // The command line that runs a program on host I when the program and its arguments are added
  // (for helpers that start the program themselves, e.g. MonitorProcess::start's `wrap`).
  QStringList wrap(int host) const { return QStringList{script()} + on_host(host, "env", {}); }
  // Whether `tool` is installed (root's sbin directories included: ip, tc, iptables).
  static bool have_tool(const QString& tool) {
    return !QStandardPaths::findExecutable(tool).isEmpty() ||
           !QStandardPaths::findExecutable(tool, {"/usr/sbin", "/sbin"}).isEmpty();
  }
  void start(QProcess& p, int host, const QString& program, const QStringList& args) const {
    if (p.processEnvironment().isEmpty()) p.setProcessEnvironment(mpi_env());
    p.start(script(), on_host(host, program, args));
  }
  ProcessOutcome run(int host, const QString& program, const QStringList& args,
                     int timeout_ms = 120000) const {
    ProcessOptions o;
    o.env = mpi_env();
    o.timeout_ms = timeout_ms;
    return run_process(script(), on_host(host, program, args), o);
  }

  bool link(int host, bool up) const {
    return run_process(script(), {"link", name_, QString::number(host), up ? "up" : "down"}, {})
               .exit_code == 0;
  }
  // The processes still running in the cluster's namespaces (pids).
  QStringList pids() const {
    const ProcessOutcome o = run_process(script(), {"pids", name_}, {});
    return o.out.split('\n', Qt::SkipEmptyParts);
  }
  // Bytes through host I's link (received + sent at its bridge port).
  qulonglong link_bytes(int host) const {
    const ProcessOutcome o = run_process(
        "ip",
        {"netns", "exec", name_ + "-br", "cat",
         "/sys/class/net/" + name_ + "-v" + QString::number(host) + "/statistics/rx_bytes",
         "/sys/class/net/" + name_ + "-v" + QString::number(host) + "/statistics/tx_bytes"},
        {});
    qulonglong sum = 0;
    for (const QString& l : o.out.split('\n', Qt::SkipEmptyParts)) sum += l.toULongLong();
    return sum;
  }

 private:
  int hosts_ = 0;
  QString name_, subnet_, skip_, error_;
};

// In a test function: skip with the reason, or fail, when the cluster could not be made.
#define SHARDLAB_REQUIRE_CLUSTER(c)                                         \
  do {                                                                      \
    if (!(c).skip_reason().isEmpty()) QSKIP(qPrintable((c).skip_reason())); \
    QVERIFY2((c).ok(), qPrintable((c).error()));                            \
  } while (0)

}  // namespace shardlab::test
