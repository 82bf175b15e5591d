// RunController: runs a job from the app and collects its telemetry for the live views.
// The Qt adapter of the launch layer (engine/launch): the job, its sinks, the collector, the
// worker command line, the end of a run and the cleanup of its processes are the launch layer's,
// shared with `shardlab run`; this class adds the QProcess for mpirun (gui/mpirun_process.h), the
// QTimer and the signals.
//
// Three ways to run (LaunchOptions::mode); the mode must match the job's parallel.backend
// (threads: "threads"; mpirun and remote: "mpi"), and the job must be valid and sharded, else
// start() refuses it (false, lastError(), nothing emitted):
//
// - threads: launch::ThreadsRun (run_threads_job on a worker std::thread), every rank publishing
//   into one mutex-guarded queue (launch::MessageQueue: publish() only appends). stop() asks the
//   job's StopRequest: every rank ends after the same step and the run finishes normally,
//   finished(true, "stopped after N steps ...").
// - mpirun: a launch::RunCollector on 127.0.0.1 (any free port, a fresh token), the job written
//   to a file, and `mpirun -np WORLD ... shardlab worker JOB --telemetry 127.0.0.1:PORT` started
//   with QProcess (the argument list from engine/launch/mpirun.h, as `shardlab run` builds it; the
//   token in SHARDLAB_TELEMETRY_TOKEN, never on the command line). Every line mpirun prints goes to
//   logLine(). finished() follows mpirun's exit (ok when it exited with status 0). stop() sends
//   SIGTERM to mpirun and, 5 s later, SIGKILL to its process group, its descendants and the run's
//   workers (launch/process_tree.h); finished(false, "stopped by the user").
// - remote: a RunCollector on LaunchOptions::listen with a fresh token written to a 0600 file and
// the
//   job written to a file; remoteCommand() is what to run on the cluster. The run finishes when
//   every rank of the HELLOs' world has finished or failed (ok when none failed). stop() stops
//   listening: finished(false, "stopped listening; ...").
//
// The Collector calls its consumers on its own thread; they only append to a queue under a short
// lock. A QTimer on the GUI thread drains the queue every kPollMs into model() and emits updated()
// when anything arrived. Rank log lines and job-state failures also go to logLine(). Every mode
// records the run (.slrec) unless LaunchOptions::record_path is "-".
//
// mpirun/remote: a worker that is killed or crashes reports nothing; the collector sees its
// connection end before the rank finished (net::ConnectionLost) and the rank turns failed in
// model() with that reason at once (the grid's tooltip shows it; logLine() says so), back to its
// state when its publisher reconnects. When a local mpirun ends unsuccessfully, the ranks that
// never said they finished or failed are marked failed with mpirun's end ("ended without
// finishing: mpirun exited with status 137"); after the user's stop, so are those whose
// connection was lost ("ended without finishing: stopped by the user").
//
// Runs dir: $SHARDLAB_RUNS_DIR when set, else "runs" in the current directory (as `shardlab run`).
//
// The destructor stops a threads run through its StopRequest and joins it (the ranks stop at their
// next step boundary; a step's collectives are bounded by the communication timeout), and
// terminates a running mpirun (SIGKILL to its process group after a bounded wait).
#pragma once

#include <QObject>
#include <QString>
#include <QTimer>

#include <atomic>
#include <memory>
#include <string>

#include "engine/launch/hosts.h"
#include "engine/launch/message_queue.h"
#include "engine/launch/run_end.h"
#include "engine/launch/run_mode.h"
#include "engine/launch/workers.h"
#include "engine/telemetry/teaching_gate.h"
#include "net/run_model.h"

namespace shardlab {
struct JobSpec;
}

namespace shardlab::launch {
class RunCollector;
class RunSinks;
class ThreadsRun;
}  // namespace shardlab::launch

namespace shardlab::gui {

class MpirunProcess;

using LaunchMode = launch::RunMode;

// The `shardlab` CLI: `given` when set, else the one next to the app's executable, else from
// PATH ("" when there is none).
QString find_shardlab(const QString& given = {});

struct LaunchOptions {
  LaunchMode mode = LaunchMode::threads;
  // remote: the collector's address, HOST:PORT (port 0: any free port, see port()).
  QString listen = "0.0.0.0:0";
  // remote: the host name put in remoteCommand() ("": the listen address when it names one host,
  // else this machine's host name).
  QString advertise_host;
  // remote: where the token is written, mode 0600 ("": <runs dir>/<job>.token).
  QString token_file;
  // mpirun/remote: where the job is written for the workers to read ("": <runs
  // dir>/<job>-<time>.json).
  QString job_file;
  // mpirun: the hosts the ranks run on, "h1:2,h2:2" (launch::parse_hosts; "": this machine).
  // With hosts the collector listens on this machine's address towards the first one, and mpirun
  // gets launch::cluster_mpirun_args, as `shardlab run --hosts` does.
  QString hosts;
  // Every mode records the run here ("": <runs dir>/<time>-<job>-<pid>.slrec; "-": no recording).
  QString record_path;
  // mpirun (and the command remote mode shows): the `shardlab` CLI ("": `shardlab` next to the
  // app's executable, else from PATH; remote: "shardlab").
  QString shardlab_path;
};

class RunController : public QObject {
  Q_OBJECT
 public:
  static constexpr int kPollMs = 100;

  explicit RunController(QObject* parent = nullptr);
  ~RunController() override;  // stops a running job (bounded; see the file comment)

  // Starts `job` (see the file comment). False, with the reason in lastError(), when the job is
  // refused or a run is already going.
  bool start(const JobSpec& job, const LaunchOptions& options = {});
  // Stops the run (see the file comment); no-op when not running.
  void stop();
  bool running() const { return running_; }
  QString lastError() const { return error_; }
  // What the ranks reported so far (reset by start()).
  const net::RunModel& model() const { return model_; }
  // The recording of the current (or last) run; "" when not recording.
  QString recordingPath() const { return recording_path_; }
  // remote mode: the command to run on the cluster (srun: `srun -n WORLD ...` instead of
  // `mpirun -np WORLD ...`); "" in the other modes.
  QString remoteCommand(bool srun) const;
  // mpirun/remote: the collector's port (0 otherwise).
  quint16 port() const { return port_; }
  // A threads run's teaching gate (job telemetry.teaching), else null: the app's TeachingBar
  // steps it on. While the run goes, every poll tells the gate the app is watching.
  std::shared_ptr<TeachingGate> teaching() const;

 signals:
  // New messages were added to model().
  void updated();
  // A line of output: mpirun's stdout/stderr, a rank's log line, a rank's failure.
  void logLine(const QString& line);
  // A worker's HELLO arrived (mpirun/remote).
  void workerConnected(int rank);
  // The run ended: ok, and a summary or the reason it failed.
  void finished(bool ok, const QString& message);

 private:
  void start_threads(const JobSpec& job, const LaunchOptions& options);
  bool start_workers(const JobSpec& job, const LaunchOptions& options);
  bool start_mpirun(const std::string& token);
  void poll();
  // Drains the queue into the model; true when anything arrived.
  bool drain();
  void on_mpirun_exited(int exit_code, bool crashed);
  // Stops the collector and the recording, emits finished() and resets the run state.
  void finish(bool ok, const QString& message);
  // Ends the threads run and mpirun, and drops the collector, the recording and the sinks.
  void release();

  LaunchMode mode_ = LaunchMode::threads;
  bool running_ = false;
  QTimer timer_;
  net::RunModel model_;
  QString error_;
  QString recording_path_;
  // Declared before what publishes into it: destroyed after.
  std::unique_ptr<launch::MessageQueue> queue_;

  // threads
  std::unique_ptr<launch::RunSinks> sinks_;
  std::unique_ptr<launch::ThreadsRun> threads_;

  // mpirun / remote
  std::unique_ptr<launch::RunCollector> collector_;
  std::atomic<uint64_t> closed_connections_{0};
  quint16 port_ = 0;
  MpirunProcess* mpirun_ = nullptr;  // owned (deleted later by release(): it may be signalling)
  bool stopping_ = false;
  // The end, once known (mpirun exited, or every remote rank is done): the last messages are
  // drained until every connection is closed or the grace period ends.
  launch::EndWatch end_;
  int world_ = 0;
  launch::HostList hosts_;         // mpirun: the hosts (empty: this machine)
  launch::WorkerCommand workers_;  // the workers' command line (remote: what remoteCommand shows)
};

}  // namespace shardlab::gui
