// RunController: runs a job from the app and collects its telemetry for the live views (issue 7).
//
// Three ways to run (LaunchOptions::mode); the mode must match the job's parallel.backend
// (threads: "threads"; mpirun and remote: "mpi"), and the job must be valid and sharded, else
// start() refuses it (false, lastError(), nothing emitted):
//
// - threads: run_threads_job on a worker std::thread, every rank publishing into one
//   mutex-guarded queue (publish() only appends). stop() asks the job's StopRequest: every rank
//   ends after the same step and the run finishes normally, finished(true, "stopped after N
//   steps ...").
// - mpirun: a net::Collector on 127.0.0.1 (any free port, a fresh token), the job written to a
//   file, and `mpirun -np WORLD ... shardlab worker JOB --telemetry 127.0.0.1:PORT` started with
//   QProcess (the argument list from engine/launch/mpirun.h, as `shardlab run` builds it; the token
//   in SHARDLAB_TELEMETRY_TOKEN, never on the command line). Every line mpirun prints goes to
//   logLine(). finished() follows mpirun's exit (ok when it exited with status 0). stop() sends
//   SIGTERM to mpirun and, 5 s later, SIGKILL to its process group; finished(false, "stopped by
//   the user").
// - remote: a Collector on LaunchOptions::listen with a fresh token written to a 0600 file and the
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
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "engine/telemetry/sink.h"
#include "engine/train/stop_request.h"
#include "net/collector.h"
#include "net/run_model.h"

class QProcess;

namespace shardlab {
struct JobSpec;
}

namespace shardlab::net {
class RecordingConsumer;
class RecordingSink;
class FanoutSink;
}  // namespace shardlab::net

namespace shardlab::gui {

// A thread-safe queue of messages for the GUI thread to take: the in-process ranks publish into
// it (a TelemetrySink) and a Collector hands it what the workers send (a MessageConsumer). Each
// message is stamped with the time it was queued (0 for in-process events: their own times
// judge liveness, as in a replay).
class MessageQueue : public telemetry::TelemetrySink, public net::MessageConsumer {
 public:
  void publish(telemetry::Event event) noexcept override;
  void on_message(const net::Message& message) override;
  // Queued as the JOB_STATE failed event that stands for it (ConnectionLost::event()).
  void on_connection_lost(const net::ConnectionLost& lost) override;
  // Every queued message with its arrival stamp, oldest first; the queue is left empty.
  std::vector<std::pair<net::Message, double>> take();

 private:
  std::mutex mu_;
  std::vector<std::pair<net::Message, double>> messages_;
};

enum class LaunchMode { threads, mpirun, remote };

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
  static constexpr int kKillAfterMs = 5000;

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
  bool start_threads(const JobSpec& job, const LaunchOptions& options);
  bool start_collector(const JobSpec& job, const LaunchOptions& options);
  void poll();
  // Drains the queue into the model; true when anything arrived.
  bool drain();
  void on_process_finished(int exit_code, bool crashed);
  void read_process_output(bool flush);
  // Stops the collector and the recording, emits finished() and resets the run state.
  void finish(bool ok, const QString& message);
  void kill_process_group();
  // Stops the collector and drops the recording and fan-out sinks (after the ranks are done).
  void release_sinks();
  // Adds a failed JOB_STATE with `reason` for every rank in the model that has neither finished
  // nor failed (after the user's stop: or failed only because its connection was lost); true
  // when there was one.
  bool mark_unfinished_failed(const QString& reason);
  void shutdown_process();

  LaunchMode mode_ = LaunchMode::threads;
  bool running_ = false;
  QTimer timer_;
  net::RunModel model_;
  std::unique_ptr<MessageQueue> queue_;
  QString error_;
  QString recording_path_;

  // threads
  std::unique_ptr<StopRequest> stop_request_;
  std::unique_ptr<net::RecordingSink> recording_sink_;
  std::vector<std::unique_ptr<net::FanoutSink>> fanouts_;
  std::thread thread_;
  std::atomic<bool> done_{false};
  bool ok_ = false;  // written by the worker before done_ is set, read after
  std::string message_;

  // mpirun / remote
  std::unique_ptr<net::RecordingConsumer> recording_consumer_;
  std::unique_ptr<net::Collector> collector_;
  std::atomic<uint64_t> closed_connections_{0};
  quint16 port_ = 0;
  QProcess* process_ = nullptr;  // owned (deleted in shutdown_process)
  qint64 process_pid_ = 0;
  QTimer kill_timer_;
  QByteArray out_buffer_, err_buffer_;
  bool stopping_ = false;
  // Set once the end is known (mpirun exited, or every remote rank is done): the last messages
  // are drained until every connection is closed or the grace period ends.
  bool ending_ = false;
  qint64 ending_deadline_ms_ = 0;
  bool end_ok_ = false;
  QString end_message_;
  int world_ = 0;
  int first_lost_ = -1;  // the first rank whose connection was lost (-1: none yet)
  QString job_file_, token_file_, advertise_host_, remote_shardlab_;
};

}  // namespace shardlab::gui
