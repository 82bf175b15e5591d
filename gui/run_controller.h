// RunController: runs a job from the app and collects its telemetry for the live views (issue 7).
//
// start() accepts a valid job with parallel.backend "threads" and a sharded strategy (ddp, zero1,
// zero2, fsdp, or a pp x tp x dp layout); strategy "none" and backend "mpi" are refused with a
// message (returns false, emits nothing). The job's data is loaded (load_job_data +
// complete_model_config) and run_threads_job runs on a worker std::thread, so a missing dataset is
// reported through finished(false, ...) like any other failure.
//
// Every rank publishes into one shared, mutex-guarded queue (QueueSink: publish() only appends
// under a short lock). A QTimer on the GUI thread drains the queue every 100 ms into a
// net::RunModel and emits updated() when anything arrived; when the worker ends, the queue is
// drained a last time and finished(ok, message) follows (message: a summary, or the what() of the
// exception the run threw). There is no stop(): training cannot be interrupted; the destructor
// waits for a running job to end (joins the thread).
#pragma once

#include <QObject>
#include <QString>
#include <QTimer>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/telemetry/sink.h"
#include "net/run_model.h"

namespace shardlab {
struct JobSpec;
}

namespace shardlab::gui {

// A thread-safe TelemetrySink that queues events for the GUI thread to take.
class QueueSink : public telemetry::TelemetrySink {
 public:
  void publish(telemetry::Event event) noexcept override;
  // Every queued event, oldest first; the queue is left empty.
  std::vector<telemetry::Event> take();

 private:
  std::mutex mu_;
  std::vector<telemetry::Event> events_;
};

class RunController : public QObject {
  Q_OBJECT
 public:
  static constexpr int kPollMs = 100;

  explicit RunController(QObject* parent = nullptr);
  ~RunController() override;  // joins a running job

  // Starts `job` (see the file comment). False, with the reason in lastError(), when the job is
  // refused or a run is already going.
  bool start(const JobSpec& job);
  bool running() const { return thread_.joinable(); }
  QString lastError() const { return error_; }
  // What the ranks reported so far (reset by start()).
  const net::RunModel& model() const { return model_; }

 signals:
  // New events were added to model().
  void updated();
  // The run ended: ok, or the reason it failed.
  void finished(bool ok, const QString& message);

 private:
  void poll();

  QTimer timer_;
  net::RunModel model_;
  std::unique_ptr<QueueSink> sink_;
  std::thread thread_;
  std::atomic<bool> done_{false};
  // Written by the worker before done_ is set, read after.
  bool ok_ = false;
  std::string message_;
  QString error_;
};

}  // namespace shardlab::gui
