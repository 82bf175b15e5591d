#include "gui/run_controller.h"

#include <QCoreApplication>
#include <QFileInfo>
#include <QStandardPaths>

#include <exception>
#include <utility>

#include "engine/core/error.h"
#include "engine/job/job_spec.h"
#include "engine/launch/hosts.h"
#include "engine/launch/mpirun.h"
#include "engine/launch/prepared_job.h"
#include "engine/launch/run_collector.h"
#include "engine/launch/run_sinks.h"
#include "engine/launch/threads_run.h"
#include "gui/mpirun_process.h"
#include "net/auth.h"

namespace shardlab::gui {

namespace {

QString qs(const std::string& s) {
  return QString::fromStdString(s);
}

// The file the user named, else `fallback`; absolute, its folder created.
std::string file_or(const QString& given, const std::string& fallback) {
  return launch::absolute_path_in_new_dir(given.isEmpty() ? fallback : given.toStdString());
}

template <class... Ts>
struct overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
overloaded(Ts...) -> overloaded<Ts...>;

}  // namespace

QString find_shardlab(const QString& given) {
  if (!given.isEmpty()) return given;
  const QString beside = QCoreApplication::applicationDirPath() + QStringLiteral("/shardlab");
  if (QFileInfo(beside).isExecutable()) return beside;
  return QStandardPaths::findExecutable(QStringLiteral("shardlab"));
}

RunController::RunController(QObject* parent) : QObject(parent) {
  timer_.setInterval(kPollMs);
  connect(&timer_, &QTimer::timeout, this, &RunController::poll);
}

RunController::~RunController() {
  timer_.stop();
  threads_.reset();  // stops and joins the ranks
  delete mpirun_;    // ends mpirun and its ranks (bounded)
  mpirun_ = nullptr;
  release();
}

void RunController::release() {
  threads_.reset();
  collector_.reset();
  sinks_.reset();
  if (!mpirun_) return;
  mpirun_->release();
  mpirun_->deleteLater();
  mpirun_ = nullptr;
}

bool RunController::start(const JobSpec& job, const LaunchOptions& options) {
  if (running_) {
    error_ = tr("A run is already going");
    return false;
  }
  if (const std::string problem = launch::mode_problem(job, options.mode); !problem.empty()) {
    error_ = qs(problem);
    return false;
  }
  error_.clear();
  model_ = net::RunModel{};
  queue_ = std::make_unique<launch::MessageQueue>();
  recording_path_.clear();
  mode_ = options.mode;
  stopping_ = false;
  end_ = {};
  closed_connections_ = 0;
  port_ = 0;
  world_ = static_cast<int>(job.parallel.world_size);
  workers_ = {};
  bool started = false;
  try {
    if (options.mode == LaunchMode::threads) start_threads(job, options);
    started = options.mode == LaunchMode::threads || start_workers(job, options);
  } catch (const std::exception& e) {
    error_ = QString::fromUtf8(e.what());
    started = false;
  }
  if (!started) {
    if (error_.isEmpty()) error_ = tr("The run could not be started");
    release();
    recording_path_.clear();
    port_ = 0;
    return false;
  }
  running_ = true;
  timer_.start();
  return true;
}

void RunController::start_threads(const JobSpec& job, const LaunchOptions& options) {
  launch::PreparedJob plan = launch::plan_job(job);  // the data is read on the run's thread
  launch::SinkOptions so;
  if (options.record_path != QStringLiteral("-"))
    so.record_path = file_or(options.record_path, launch::app_recording_path(job));
  so.also = {queue_.get()};
  std::vector<int> ranks;
  for (int r = 0; r < world_; ++r) {
    ranks.push_back(r);
    model_.add(net::Message{plan.hello(r)});
  }
  sinks_ = std::make_unique<launch::RunSinks>(plan, ranks, so);
  recording_path_ = qs(sinks_->record_path());
  threads_ = std::make_unique<launch::ThreadsRun>(std::move(plan), sinks_->sink_of());
}

bool RunController::start_workers(const JobSpec& job, const LaunchOptions& options) {
  const bool remote = options.mode == LaunchMode::remote;
  const QString shardlab = remote ? (options.shardlab_path.isEmpty() ? QStringLiteral("shardlab")
                                                                     : options.shardlab_path)
                                  : find_shardlab(options.shardlab_path);
  if (shardlab.isEmpty()) {
    error_ = tr("Cannot find the shardlab command (next to the app or on PATH); set its path");
    return false;
  }
  launch::WorkerCommand w;
  w.program = shardlab.toStdString();
  w.job_file = file_or(options.job_file, launch::app_job_file(job));
  launch::write_worker_job(job, w.job_file);
  launch::CollectorRunOptions co;
  co.listen = remote ? options.listen.toStdString() : "127.0.0.1:0";
  hosts_ = {};
  if (!remote && !options.hosts.isEmpty()) {
    try {
      hosts_ = launch::parse_hosts(options.hosts.toStdString(), "Hosts");
      SL_ENFORCE(hosts_.total_slots() >= world_,
                 "Hosts: {} gives {} slots, but the job has {} ranks", hosts_.text(),
                 hosts_.total_slots(), world_);
      co.listen = launch::collector_listen_for(hosts_);
    } catch (const Error& e) {
      error_ = QString::fromStdString(e.what());
      return false;
    }
  }
  if (options.record_path != QStringLiteral("-"))
    co.record_path = file_or(options.record_path, launch::app_recording_path(job));
  co.consumers = {queue_.get()};
  co.log = [queue = queue_.get(), closed = &closed_connections_](const std::string& line) {
    queue->log(line);  // poll() shows it as a telemetry line
    closed->fetch_add(1);
  };
  collector_ = std::make_unique<launch::RunCollector>(co);
  port_ = collector_->port();
  recording_path_ = qs(collector_->record_path());
  workers_ = w;
  if (!remote) {
    workers_.telemetry =
        launch::host_port(hosts_.empty() ? std::string("127.0.0.1") : collector_->host(), port_);
    return start_mpirun(collector_->token());
  }
  workers_.token_file = file_or(options.token_file, launch::app_token_file(job));
  net::write_token_file(workers_.token_file, collector_->token());
  workers_.telemetry =
      launch::advertise_host(collector_->host(), options.advertise_host.toStdString()) + ":" +
      std::to_string(port_);
  return true;
}

bool RunController::start_mpirun(const std::string& token) {
  mpirun_ = new MpirunProcess(workers_.job_file);
  connect(mpirun_, &MpirunProcess::line, this, &RunController::logLine);
  connect(mpirun_, &MpirunProcess::exited, this, &RunController::on_mpirun_exited);
  connect(mpirun_, &MpirunProcess::failedToStart, this,
          [this](const QString& why) { finish(false, why); });
  std::vector<std::string> args = launch::cluster_mpirun_args(hosts_, world_, {net::kTokenEnv});
  const std::vector<std::string> worker = launch::worker_argv(workers_);
  args.insert(args.end(), worker.begin(), worker.end());
  return mpirun_->start(launch::mpirun_argv(world_, args), launch::worker_environment(token),
                        &error_);
}

void RunController::on_mpirun_exited(int exit_code, bool crashed) {
  if (stopping_) {
    // Whatever mpirun left behind goes too (the user asked for the run to end).
    mpirun_->kill_all();
    finish(false, tr("stopped by the user"));
    return;
  }
  end_.known(launch::mpirun_end(exit_code, crashed, world_));
  poll();
}

void RunController::stop() {
  if (!running_) return;
  switch (mode_) {
    case LaunchMode::threads:
      if (threads_) threads_->stop();
      return;
    case LaunchMode::mpirun:
      if (stopping_ || !mpirun_) return;
      stopping_ = true;
      mpirun_->terminate();
      return;
    case LaunchMode::remote:
      finish(false, tr("stopped listening; the workers keep running until they end"));
      return;
  }
}

bool RunController::drain() {
  if (!queue_) return false;
  std::vector<std::pair<net::Message, double>> messages = queue_->take();
  for (auto& [message, received] : messages) {
    if (const auto* e = std::get_if<telemetry::Event>(&message); e && e->rank < 0) {
      if (const auto* log = std::get_if<telemetry::LogLineEvent>(&e->payload))
        emit logLine(QStringLiteral("telemetry: ") + qs(log->text));
      continue;
    }
    model_.add(message, received);
    std::visit(
        overloaded{
            [&](const net::Hello& h) {
              if (mode_ != LaunchMode::threads) emit workerConnected(h.rank);
            },
            [&](const telemetry::Event& e) {
              if (const auto* log = std::get_if<telemetry::LogLineEvent>(&e.payload))
                emit logLine(QStringLiteral("rank %1: %2").arg(e.rank).arg(qs(log->text)));
              else if (const auto* s = std::get_if<telemetry::JobStateEvent>(&e.payload);
                       s && s->state == telemetry::JobState::failed &&
                       // Ranks the user's stop takes away: finish() says why, once.
                       !(stopping_ && e.seq == net::kCollectorSeq)) {
                if (e.seq == net::kCollectorSeq) end_.connection_lost(e.rank);
                emit logLine(QStringLiteral("rank %1 failed: %2").arg(e.rank).arg(qs(s->reason)));
              }
            },
            [](const auto&) {},
        },
        message);
  }
  return !messages.empty();
}

std::shared_ptr<TeachingGate> RunController::teaching() const {
  return threads_ ? threads_->teaching() : nullptr;
}

void RunController::poll() {
  if (!running_) return;
  if (mode_ == LaunchMode::threads) {
    if (threads_->teaching()) threads_->teaching()->viewer_seen();
    // Read before draining: every event of a done run is queued.
    const bool done = threads_->done();
    if (drain()) emit updated();
    if (!done) return;
    threads_->join();
    finish(threads_->ok(), qs(threads_->message()));
    return;
  }
  // Read before draining: when every connection had closed, all of their messages are queued.
  const uint64_t closed = closed_connections_.load();
  const bool all_closed = collector_ && closed >= collector_->stats().accepted;
  if (drain()) emit updated();
  // The next tick checks whether the connections have closed.
  if (mode_ == LaunchMode::remote && end_.watch_remote(model_)) return;
  if (const auto end = end_.due(model_, all_closed, mode_ == LaunchMode::mpirun))
    finish(end->ok, qs(end->message));
}

void RunController::finish(bool ok, const QString& message) {
  if (!running_) return;
  timer_.stop();
  QString text = message;
  try {
    if (collector_) collector_->finish();  // the consumers have seen their last message
    if (sinks_) sinks_->close();
  } catch (const std::exception& e) {
    text += tr(" (the recording failed: %1)").arg(QString::fromUtf8(e.what()));
  }
  const bool more = drain();
  release();
  running_ = false;
  // A local mpirun that failed or was stopped took its ranks with it: a rank that never said it
  // finished or failed (killed, crashed) is marked failed with the reason, for the grid and log.
  std::vector<int> marked;
  if (mode_ == LaunchMode::mpirun && !ok)
    marked = launch::mark_unfinished_failed(model_, text.toStdString(), stopping_);
  for (int rank : marked)
    emit logLine(tr("rank %1 ended without finishing (%2)").arg(rank).arg(text));
  if (more || !marked.empty()) emit updated();
  emit finished(ok, text);
}

QString RunController::remoteCommand(bool srun) const {
  if (mode_ != LaunchMode::remote || workers_.token_file.empty() || port_ == 0) return {};
  return qs(launch::remote_command(workers_, world_, srun));
}

}  // namespace shardlab::gui
