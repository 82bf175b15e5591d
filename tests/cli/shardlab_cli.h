// The `shardlab` command run as a user runs it, for tst_cli and tst_cli_help: a child process in
// the source tree with a deadline (tests/common/process.h), its recorded runs in a temporary
// folder (SHARDLAB_RUNS_DIR), never in the source tree.
#pragma once

#include <QProcess>
#include <QString>
#include <QStringList>
#include <QTemporaryDir>

#include "tests/common/process.h"

namespace shardlab::test {

struct CliOutcome {
  int exit_code = -1;
  QProcess::ExitStatus status = QProcess::CrashExit;  // CrashExit also when it timed out
  QString out, err;
};

// Where `shardlab run` records runs during the tests.
inline QString cli_runs_dir() {
  static QTemporaryDir dir;
  return dir.path();
}

inline CliOutcome run_shardlab(const QStringList& args, int timeout_ms) {
  ProcessOptions po;
  po.cwd = SHARDLAB_SOURCE_DIR;
  po.env.insert("SHARDLAB_RUNS_DIR", cli_runs_dir());
  po.timeout_ms = timeout_ms;
  const ProcessOutcome r = run_process(SHARDLAB_CLI, args, po);
  CliOutcome o;
  o.exit_code = r.exit_code;
  o.status = r.finished && r.exit_code >= 0 ? QProcess::NormalExit : QProcess::CrashExit;
  o.out = r.out;
  o.err = r.err;
  return o;
}

}  // namespace shardlab::test
