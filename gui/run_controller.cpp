#include "gui/run_controller.h"

#include <cstdio>
#include <exception>
#include <utility>

#include "engine/job/job_spec.h"
#include "engine/parallel/rank_runner.h"
#include "engine/train/build.h"

namespace shardlab::gui {

void QueueSink::publish(telemetry::Event event) noexcept {
  try {
    std::lock_guard lock(mu_);
    events_.push_back(std::move(event));
  } catch (...) {
    // Out of memory: drop the event (publish never throws).
  }
}

std::vector<telemetry::Event> QueueSink::take() {
  std::vector<telemetry::Event> out;
  std::lock_guard lock(mu_);
  out.swap(events_);
  return out;
}

RunController::RunController(QObject* parent) : QObject(parent) {
  timer_.setInterval(kPollMs);
  connect(&timer_, &QTimer::timeout, this, &RunController::poll);
}

RunController::~RunController() {
  timer_.stop();
  if (thread_.joinable()) thread_.join();
}

bool RunController::start(const JobSpec& job) {
  if (thread_.joinable()) {
    error_ = tr("A run is already going");
    return false;
  }
  if (const auto problems = validate(job); !problems.empty()) {
    error_ = QString::fromStdString(problems.front().to_string());
    return false;
  }
  if (job.parallel.strategy == "none") {
    error_ = tr("The app runs sharded jobs only (parallel.strategy \"none\" is not supported yet)");
    return false;
  }
  if (job.parallel.backend != "threads") {
    error_ = tr("The app runs parallel.backend \"threads\" only, not \"%1\"")
                 .arg(QString::fromStdString(job.parallel.backend));
    return false;
  }
  error_.clear();
  model_ = net::RunModel{};
  sink_ = std::make_unique<QueueSink>();
  done_ = false;
  ok_ = false;
  message_.clear();
  thread_ = std::thread([this, job] {
    try {
      JobSpec completed = job;
      const Datasets data = load_job_data(completed);
      complete_model_config(completed.model, data);
      RankRunOptions options;
      QueueSink* sink = sink_.get();
      options.telemetry = [sink](int) -> telemetry::TelemetrySink* { return sink; };
      const ParallelRunResult run = run_threads_job(completed, data, options);
      ok_ = true;
      char text[128];
      std::snprintf(text, sizeof text, "finished: %zu ranks, %.1f s of training", run.ranks.size(),
                    run.result.train_seconds);
      message_ = text;
    } catch (const std::exception& e) {
      message_ = e.what();
    } catch (...) {
      message_ = "unknown error";
    }
    done_ = true;
  });
  timer_.start();
  return true;
}

void RunController::poll() {
  const bool done = done_.load();  // read before draining: every event of a done run is queued
  std::vector<telemetry::Event> events = sink_ ? sink_->take() : std::vector<telemetry::Event>{};
  for (telemetry::Event& e : events) model_.add(net::Message{std::move(e)});
  if (!events.empty()) emit updated();
  if (!done) return;
  timer_.stop();
  if (thread_.joinable()) thread_.join();
  emit finished(ok_, QString::fromStdString(message_));
}

}  // namespace shardlab::gui
