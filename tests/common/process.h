// Running a program (the shardlab command, mpirun, cpack, ...) as a child process with a deadline,
// for suites that test what a user would run. Never waits without a timeout; a child that outlives
// it is killed.
#pragma once

#include <QElapsedTimer>
#include <QProcess>
#include <QProcessEnvironment>
#include <QString>
#include <QStringList>

namespace shardlab::test {

struct ProcessOptions {
  QString cwd;  // empty: the test's own
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  int start_timeout_ms = 30000;
  int timeout_ms = 120000;  // to finish, after starting
};

struct ProcessOutcome {
  bool finished = false;  // false: it did not start, or was killed at the timeout
  int exit_code = -1;     // -1 unless it exited normally
  qint64 ms = 0;          // from start() until it finished (or was killed)
  QString out, err;       // err ends with a line saying why, when it did not finish
};

inline ProcessOutcome run_process(const QString& program, const QStringList& args,
                                  const ProcessOptions& options = {}) {
  QProcess p;
  if (!options.cwd.isEmpty()) p.setWorkingDirectory(options.cwd);
  p.setProcessEnvironment(options.env);
  QElapsedTimer t;
  t.start();
  p.start(program, args);
  ProcessOutcome o;
  if (!p.waitForStarted(options.start_timeout_ms)) {
    o.err = program + ": did not start: " + p.errorString();
    return o;
  }
  o.finished = p.waitForFinished(options.timeout_ms);
  o.ms = t.elapsed();
  if (!o.finished) {
    p.kill();
    p.waitForFinished(5000);
  }
  if (o.finished && p.exitStatus() == QProcess::NormalExit) o.exit_code = p.exitCode();
  o.out = QString::fromUtf8(p.readAllStandardOutput());
  o.err = QString::fromUtf8(p.readAllStandardError());
  if (!o.finished)
    o.err += "\n" + program + QString(": timed out after %1 ms").arg(options.timeout_ms);
  return o;
}

}  // namespace shardlab::test
