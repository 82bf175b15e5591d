// MpirunProcess: the app's Qt adapter for a local mpirun (RunController's mpirun mode). It starts
// the launcher's command line (engine/launch/mpirun.h) with QProcess in a process group of its
// own, hands every line mpirun prints to line(), and ends it: terminate() sends SIGTERM and,
// kKillAfterMs later, SIGKILL to mpirun, what it started and the run's workers
// (engine/launch/process_tree.h). The destructor ends a running mpirun the same way, bounded.
#pragma once

#include <QByteArray>
#include <QObject>
#include <QString>
#include <QTimer>

#include <string>
#include <utility>
#include <vector>

class QProcess;

namespace shardlab::gui {

class MpirunProcess : public QObject {
  Q_OBJECT
 public:
  static constexpr int kKillAfterMs = 5000;

  // `job_file`: the job the workers read (their command lines name it: how the workers that
  // outlived mpirun are found).
  MpirunProcess(std::string job_file, QObject* parent = nullptr);
  ~MpirunProcess() override;

  // Starts argv (program first) with `env` added to this process's environment. False, with the
  // reason in *error, when it cannot be started.
  bool start(const std::vector<std::string>& argv,
             const std::vector<std::pair<std::string, std::string>>& env, QString* error);
  // SIGTERM now, SIGKILL to the whole run after kKillAfterMs. False when it is not running.
  bool terminate();
  // SIGKILL to mpirun, its descendants and the run's workers.
  void kill_all();
  // Stops reporting (no more signals) and kills mpirun if it still runs; for the end of a run.
  void release();

 signals:
  void line(const QString& text);
  void exited(int exit_code, bool crashed);
  void failedToStart(const QString& why);

 private:
  void read_output(bool flush);

  std::string job_file_;
  QProcess* process_ = nullptr;  // a child of this object
  qint64 pid_ = 0;
  QTimer kill_timer_;
  QByteArray out_, err_;
};

}  // namespace shardlab::gui
