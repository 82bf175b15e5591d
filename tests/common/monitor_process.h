// `shardlab monitor` as a child process for suites that stream a real run to it: it listens on a
// free loopback port, records to DIR/run.slrec with the token DIR/monitor.token, and runs until
// every rank is done (--until-done) or `duration` seconds. Its output is collected as it comes and
// its tables can be read back. Every wait has a timeout; the destructor kills a monitor still
// running. Needs SHARDLAB_CLI and SHARDLAB_SOURCE_DIR (the test's compile definitions).
#pragma once

#include <QElapsedTimer>
#include <QProcess>
#include <QProcessEnvironment>
#include <QRegularExpression>
#include <QString>
#include <QStringList>

namespace shardlab::test {

class MonitorProcess {
 public:
  explicit MonitorProcess(const QString& dir) : dir_(dir) {}
  ~MonitorProcess() {
    if (p_.state() != QProcess::NotRunning) {
      p_.kill();
      p_.waitForFinished(5000);
    }
  }
  MonitorProcess(const MonitorProcess&) = delete;
  MonitorProcess& operator=(const MonitorProcess&) = delete;

  // Starts it (a table every `interval` seconds) and waits at most 10 s for its port. `host`: the
  // address it listens on; `wrap`: a command line it runs under (a test cluster's host,
  // tests/cluster/netns_cluster.h), empty for none.
  bool start(double interval, double duration,
             const QProcessEnvironment& env = QProcessEnvironment::systemEnvironment(),
             const QStringList& wrap = {}, const QString& host = "127.0.0.1") {
    host_ = host;
    p_.setWorkingDirectory(SHARDLAB_SOURCE_DIR);
    p_.setProcessEnvironment(env);
    const QStringList args{"monitor",    "--listen",
                           host + ":0",  "--record",
                           recording(),  "--token-file",
                           token(),      "--until-done",
                           "--interval", QString::number(interval),
                           "--duration", QString::number(duration)};
    if (wrap.isEmpty())
      p_.start(SHARDLAB_CLI, args);
    else
      p_.start(wrap.front(), wrap.mid(1) + QStringList{SHARDLAB_CLI} + args);
    if (!p_.waitForStarted(10000)) return false;
    QElapsedTimer t;
    t.start();
    const QRegularExpression listening("listening on " + QRegularExpression::escape(host) +
                                       ":(\\d+)");
    while (t.elapsed() < 10000) {
      poll(100);
      const auto m = listening.match(out_);
      if (m.hasMatch()) {
        port_ = m.captured(1).toInt();
        return port_ > 0;
      }
    }
    return false;
  }

  // Reads what the monitor printed meanwhile (waiting at most `ms`).
  void poll(int ms) {
    p_.waitForReadyRead(ms);
    out_ += QString::fromUtf8(p_.readAllStandardOutput());
    err_ += QString::fromUtf8(p_.readAllStandardError());
  }
  // Waits at most `ms` for it to end; true when it ended with status 0.
  bool wait_done(int ms) {
    QElapsedTimer t;
    t.start();
    while (p_.state() != QProcess::NotRunning && t.elapsed() < ms) poll(100);
    poll(0);
    return p_.state() == QProcess::NotRunning && p_.exitCode() == 0;
  }

  // The complete tables printed so far (each from its header to the blank line after it).
  QStringList tables() const {
    QStringList out;
    for (const QString& chunk : out_.split(" RANK  COORDS").mid(1)) {
      const qsizetype end = chunk.indexOf("\n\n");
      if (end >= 0) out << chunk.left(end);
    }
    return out;
  }
  // The last complete table ("" before any).
  QString last_table() const {
    const QStringList all = tables();
    return all.isEmpty() ? QString() : all.back();
  }

  QString address() const { return QString("%1:%2").arg(host_).arg(port_); }
  QString token() const { return dir_ + "/monitor.token"; }
  QString recording() const { return dir_ + "/run.slrec"; }
  QString output() const { return out_ + err_; }

 private:
  QString dir_;
  QString host_ = "127.0.0.1";
  QProcess p_;
  QString out_, err_;
  int port_ = 0;
};

}  // namespace shardlab::test
