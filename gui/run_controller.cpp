#include "gui/run_controller.h"

#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <QCoreApplication>
#include <QDateTime>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QProcess>
#include <QStandardPaths>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <utility>

#include "engine/core/error.h"
#include "engine/job/job_spec.h"
#include "engine/launch/mpirun.h"
#include "engine/parallel/rank_runner.h"
#include "engine/parallel/topology.h"
#include "engine/train/build.h"
#include "net/auth.h"
#include "net/consumers.h"
#include "net/job_hello.h"
#include "net/local_sinks.h"
#include "net/publisher.h"
#include "net/run_paths.h"

namespace shardlab::gui {

namespace {

// How long the last messages may take to arrive once the end of a run is known.
constexpr qint64 kDrainGraceMs = 3000;

qint64 now_ms() {
  return QDateTime::currentMSecsSinceEpoch();
}

QString qs(const std::string& s) {
  return QString::fromStdString(s);
}

std::string host_name() {
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) != 0) return "localhost";
  return host;
}

// The runs folder (net/run_paths.h: $SHARDLAB_RUNS_DIR or runs/), absolute.
QString runs_dir() {
  return QDir(QString::fromLocal8Bit(net::runs_dir())).absolutePath();
}

QString safe_name(const JobSpec& job) {
  return qs(net::safe_job_name(job.name));
}

QString stamp() {
  return QDateTime::currentDateTime().toString(QStringLiteral("yyyyMMdd-HHmmss"));
}

// `path` made absolute, its folder created; IoError when the folder cannot be made.
QString prepare_path(const QString& path) {
  const QFileInfo info(path);
  const QString dir = info.absolutePath();
  if (!QDir().mkpath(dir)) SL_THROW(IoError, "cannot create the folder {}", dir.toStdString());
  return info.absoluteFilePath();
}

// A path that does not exist yet: `base` + suffix, or base-2 + suffix, base-3 + suffix, ...
QString unused_path(const QString& base, const QString& suffix) {
  QString path = base + suffix;
  for (int i = 2; QFileInfo::exists(path); ++i)
    path = QStringLiteral("%1-%2%3").arg(base).arg(i).arg(suffix);
  return path;
}

// As `shardlab run` names it (net/run_paths.h), made unique in the folder.
QString default_recording_path(const JobSpec& job) {
  return unused_path(runs_dir() + QLatin1Char('/') + qs(net::recording_base_name(job.name)),
                     QStringLiteral(".slrec"));
}

// The `shardlab` CLI: the one given, else next to this executable, else from PATH.
QString find_shardlab(const QString& given) {
  if (!given.isEmpty()) return given;
  const QString beside = QCoreApplication::applicationDirPath() + QStringLiteral("/shardlab");
  if (QFileInfo(beside).isExecutable()) return beside;
  return QStandardPaths::findExecutable(QStringLiteral("shardlab"));
}

// One word for a POSIX shell: as is when it is plain, else in single quotes.
QString shell_quote(const QString& word) {
  static const QString plain = QStringLiteral("@%+=:,./-_");
  bool ok = !word.isEmpty();
  for (QChar ch : word)
    if (!((ch.unicode() < 128 && ch.isLetterOrNumber()) || plain.contains(ch))) ok = false;
  if (ok) return word;
  QString quoted = word;
  quoted.replace(QStringLiteral("'"), QStringLiteral("'\\''"));
  return QStringLiteral("'") + quoted + QStringLiteral("'");
}

// Every process below `root` (children, grandchildren, ...), from /proc.
std::vector<pid_t> descendants(pid_t root) {
  std::vector<std::pair<pid_t, pid_t>> parent_of;  // (pid, ppid)
  const QStringList entries = QDir(QStringLiteral("/proc")).entryList(QDir::Dirs);
  for (const QString& e : entries) {
    bool ok = false;
    const pid_t pid = static_cast<pid_t>(e.toInt(&ok));
    if (!ok) continue;
    QFile stat(QStringLiteral("/proc/%1/stat").arg(e));
    if (!stat.open(QIODevice::ReadOnly)) continue;
    const QByteArray text = stat.readAll();
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses; ppid follows the last ')'.
    const int close = text.lastIndexOf(')');
    if (close < 0) continue;
    const QList<QByteArray> fields = text.mid(close + 2).split(' ');
    if (fields.size() < 2) continue;
    parent_of.emplace_back(pid, static_cast<pid_t>(fields[1].toInt()));
  }
  std::vector<pid_t> out{root};
  for (size_t i = 0; i < out.size(); ++i)
    for (const auto& [pid, ppid] : parent_of)
      if (ppid == out[i]) out.push_back(pid);
  out.erase(out.begin());
  return out;
}

// The processes whose command line contains `needle` (this run's job file: its workers, also
// those that outlived mpirun), from /proc.
std::vector<pid_t> processes_with(const QString& needle) {
  std::vector<pid_t> out;
  if (needle.isEmpty()) return out;
  const QByteArray want = needle.toLocal8Bit();
  const pid_t self = getpid();
  const QStringList entries = QDir(QStringLiteral("/proc")).entryList(QDir::Dirs);
  for (const QString& e : entries) {
    bool ok = false;
    const pid_t pid = static_cast<pid_t>(e.toInt(&ok));
    if (!ok || pid == self) continue;
    QFile cmdline(QStringLiteral("/proc/%1/cmdline").arg(e));
    if (!cmdline.open(QIODevice::ReadOnly)) continue;
    QByteArray text = cmdline.readAll();
    text.replace('\0', ' ');
    if (text.contains(want) && text.contains(" worker ")) out.push_back(pid);
  }
  return out;
}

template <class... Ts>
struct overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
overloaded(Ts...) -> overloaded<Ts...>;

}  // namespace

void MessageQueue::publish(telemetry::Event event) noexcept {
  try {
    std::lock_guard lock(mu_);
    messages_.emplace_back(net::Message{std::move(event)}, 0.0);
  } catch (...) {
    // Out of memory: drop the event (publish never throws).
  }
}

void MessageQueue::on_message(const net::Message& message) {
  const double received = telemetry::now_seconds();
  std::lock_guard lock(mu_);
  messages_.emplace_back(message, received);
}

void MessageQueue::on_connection_lost(const net::ConnectionLost& lost) {
  net::Message message{lost.event()};
  std::lock_guard lock(mu_);
  messages_.emplace_back(std::move(message), lost.time);
}

std::vector<std::pair<net::Message, double>> MessageQueue::take() {
  std::vector<std::pair<net::Message, double>> out;
  std::lock_guard lock(mu_);
  out.swap(messages_);
  return out;
}

RunController::RunController(QObject* parent) : QObject(parent) {
  timer_.setInterval(kPollMs);
  connect(&timer_, &QTimer::timeout, this, &RunController::poll);
  kill_timer_.setSingleShot(true);
  connect(&kill_timer_, &QTimer::timeout, this, [this] {
    emit logLine(tr("mpirun did not end within %1 s of SIGTERM: killing it and its ranks")
                     .arg(kKillAfterMs / 1000));
    kill_process_group();
  });
}

RunController::~RunController() {
  timer_.stop();
  kill_timer_.stop();
  if (thread_.joinable()) {
    if (stop_request_) stop_request_->request();
    thread_.join();
  }
  if (process_) {
    disconnect(process_, nullptr, this, nullptr);
    if (process_->state() != QProcess::NotRunning) {
      process_->terminate();
      if (!process_->waitForFinished(3000)) {
        kill_process_group();
        process_->waitForFinished(2000);
      }
    }
    delete process_;
    process_ = nullptr;
  }
  release_sinks();
}

void RunController::release_sinks() {
  if (collector_) collector_->stop();
  collector_.reset();
  recording_consumer_.reset();
  fanouts_.clear();
  recording_sink_.reset();
}

bool RunController::start(const JobSpec& job, const LaunchOptions& options) {
  if (running_) {
    error_ = tr("A run is already going");
    return false;
  }
  if (const auto problems = validate(job); !problems.empty()) {
    error_ = qs(problems.front().to_string());
    return false;
  }
  if (job.parallel.strategy == "none") {
    error_ = tr("The app runs sharded jobs only (parallel.strategy \"none\" is not supported yet)");
    return false;
  }
  const char* needed = options.mode == LaunchMode::threads ? "threads" : "mpi";
  if (job.parallel.backend != needed) {
    const QString mode = options.mode == LaunchMode::threads  ? QStringLiteral("threads")
                         : options.mode == LaunchMode::mpirun ? QStringLiteral("mpirun")
                                                              : QStringLiteral("remote");
    error_ = tr("The %1 mode runs jobs with parallel.backend \"%2\", but this job's "
                "parallel.backend is \"%3\"")
                 .arg(mode, QString::fromLatin1(needed), qs(job.parallel.backend));
    return false;
  }
  error_.clear();
  model_ = net::RunModel{};
  queue_ = std::make_unique<MessageQueue>();
  recording_path_.clear();
  mode_ = options.mode;
  done_ = false;
  ok_ = false;
  message_.clear();
  stopping_ = false;
  ending_ = false;
  end_ok_ = false;
  first_lost_ = -1;
  end_message_.clear();
  closed_connections_ = 0;
  port_ = 0;
  world_ = static_cast<int>(job.parallel.world_size);
  job_file_.clear();
  token_file_.clear();
  advertise_host_.clear();
  remote_shardlab_.clear();
  out_buffer_.clear();
  err_buffer_.clear();
  bool started = false;
  try {
    started = options.mode == LaunchMode::threads ? start_threads(job, options)
                                                  : start_collector(job, options);
  } catch (const std::exception& e) {
    error_ = QString::fromUtf8(e.what());
    started = false;
  }
  if (!started) {
    if (error_.isEmpty()) error_ = tr("The run could not be started");
    if (process_) {
      disconnect(process_, nullptr, this, nullptr);
      delete process_;
      process_ = nullptr;
    }
    release_sinks();
    recording_path_.clear();
    port_ = 0;
    return false;
  }
  running_ = true;
  timer_.start();
  return true;
}

bool RunController::start_threads(const JobSpec& job, const LaunchOptions& options) {
  stop_request_ = std::make_unique<StopRequest>();
  const int world = world_;
  fanouts_.clear();
  recording_sink_.reset();
  if (options.record_path != QStringLiteral("-")) {
    recording_path_ = prepare_path(options.record_path.isEmpty() ? default_recording_path(job)
                                                                 : options.record_path);
    recording_sink_ = std::make_unique<net::RecordingSink>(recording_path_.toStdString());
  }
  for (int r = 0; r < world; ++r) {
    const net::Hello hello = net::hello_for(job, r);
    if (recording_sink_) recording_sink_->add_hello(hello);
    model_.add(net::Message{hello});
    std::vector<telemetry::TelemetrySink*> to;
    if (recording_sink_) to.push_back(recording_sink_.get());
    to.push_back(queue_.get());
    fanouts_.push_back(std::make_unique<net::FanoutSink>(std::move(to)));
  }
  std::vector<telemetry::TelemetrySink*> sinks;
  for (auto& f : fanouts_) sinks.push_back(f.get());
  StopRequest* stop = stop_request_.get();
  thread_ = std::thread([this, job, sinks, stop] {
    try {
      JobSpec completed = job;
      const Datasets data = load_job_data(completed);
      complete_model_config(completed.model, data);
      RankRunOptions options;
      options.telemetry = [sinks](int rank) -> telemetry::TelemetrySink* {
        return rank >= 0 && static_cast<size_t>(rank) < sinks.size()
                   ? sinks[static_cast<size_t>(rank)]
                   : nullptr;
      };
      options.stop = stop;
      const ParallelRunResult run = run_threads_job(completed, data, options);
      ok_ = true;
      char text[512];
      if (run.result.stopped_early)
        std::snprintf(text, sizeof text,
                      "stopped after %lld steps (%s): %zu ranks, %.1f s of training",
                      static_cast<long long>(run.result.steps), run.result.stop_reason.c_str(),
                      run.ranks.size(), run.result.train_seconds);
      else
        std::snprintf(text, sizeof text, "finished: %zu ranks, %lld steps, %.1f s of training",
                      run.ranks.size(), static_cast<long long>(run.result.steps),
                      run.result.train_seconds);
      message_ = text;
    } catch (const std::exception& e) {
      message_ = e.what();
    } catch (...) {
      message_ = "unknown error";
    }
    done_ = true;
  });
  return true;
}

bool RunController::start_collector(const JobSpec& job, const LaunchOptions& options) {
  const bool remote = options.mode == LaunchMode::remote;
  QString shardlab;
  if (!remote) {
    shardlab = find_shardlab(options.shardlab_path);
    if (shardlab.isEmpty()) {
      error_ = tr("Cannot find the shardlab command (next to the app or on PATH); set its path");
      return false;
    }
  }
  // The job the workers read: this job, its telemetry section cleared (the flags below say where
  // to stream; a token file named there would win over the token given to them).
  JobSpec for_workers = job;
  for_workers.telemetry = TelemetryConfig{};
  job_file_ = prepare_path(
      options.job_file.isEmpty()
          ? unused_path(QStringLiteral("%1/%2-%3").arg(runs_dir(), safe_name(job), stamp()),
                        QStringLiteral(".json"))
          : options.job_file);
  save_job(for_workers, job_file_.toStdString());

  net::CollectorOptions co;
  co.token = net::make_token();
  if (remote) {
    std::string host;
    uint16_t port = 0;
    net::parse_host_port(options.listen.toStdString(), host, port, "listen", true);
    co.address = host;
    co.port = port;
    token_file_ = prepare_path(options.token_file.isEmpty()
                                   ? QStringLiteral("%1/%2.token").arg(runs_dir(), safe_name(job))
                                   : options.token_file);
    net::write_token_file(token_file_.toStdString(), co.token);
    if (!options.advertise_host.isEmpty())
      advertise_host_ = options.advertise_host;
    else if (host.empty() || host == "0.0.0.0" || host == "::" || host == "*")
      advertise_host_ = qs(host_name());
    else
      advertise_host_ = qs(host);
    remote_shardlab_ =
        options.shardlab_path.isEmpty() ? QStringLiteral("shardlab") : options.shardlab_path;
  } else {
    co.address = "127.0.0.1";
    co.port = 0;
  }
  MessageQueue* queue = queue_.get();
  std::atomic<uint64_t>* closed = &closed_connections_;
  co.log = [queue, closed](const std::string& line) {
    // A LOG event of no rank (-1): poll() shows it as a telemetry line.
    telemetry::Event e;
    e.rank = -1;
    e.time = telemetry::now_seconds();
    e.payload = telemetry::LogLineEvent{line};
    queue->publish(std::move(e));
    closed->fetch_add(1);
  };
  std::vector<net::MessageConsumer*> consumers{queue_.get()};
  if (options.record_path != QStringLiteral("-")) {
    recording_path_ = prepare_path(options.record_path.isEmpty() ? default_recording_path(job)
                                                                 : options.record_path);
    recording_consumer_ = std::make_unique<net::RecordingConsumer>(recording_path_.toStdString());
    consumers.push_back(recording_consumer_.get());
  }
  collector_ = std::make_unique<net::Collector>(co, consumers);
  port_ = collector_->port();
  collector_->start();
  if (remote) return true;

  const std::vector<std::string> argv =
      launch::mpirun_argv(world_, {shardlab.toStdString(), "worker", job_file_.toStdString(),
                                   "--telemetry", "127.0.0.1:" + std::to_string(port_)});
  QStringList args;
  for (size_t i = 1; i < argv.size(); ++i) args << qs(argv[i]);
  process_ = new QProcess;
  process_->setProgram(qs(argv.front()));
  process_->setArguments(args);
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert(QString::fromLatin1(net::kTokenEnv), qs(co.token));
  if (launch::running_as_root()) {
    env.insert(QStringLiteral("OMPI_ALLOW_RUN_AS_ROOT"), QStringLiteral("1"));
    env.insert(QStringLiteral("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"), QStringLiteral("1"));
  }
  process_->setProcessEnvironment(env);
  // Its own process group, so a kill reaches what it started in that group too.
  process_->setChildProcessModifier([] { ::setpgid(0, 0); });
  connect(process_, &QProcess::readyReadStandardOutput, this,
          [this] { read_process_output(false); });
  connect(process_, &QProcess::readyReadStandardError, this,
          [this] { read_process_output(false); });
  connect(process_, &QProcess::finished, this, [this](int code, QProcess::ExitStatus status) {
    on_process_finished(code, status == QProcess::CrashExit);
  });
  connect(process_, &QProcess::errorOccurred, this, [this](QProcess::ProcessError e) {
    if (e != QProcess::FailedToStart || !process_) return;
    const QString why = process_->errorString();
    finish(false, tr("Cannot start %1: %2").arg(process_->program(), why));
  });
  process_->start();
  if (process_->state() == QProcess::NotRunning) {
    error_ = tr("Cannot start %1: %2").arg(process_->program(), process_->errorString());
    return false;
  }
  process_pid_ = process_->processId();
  emit logLine(QStringLiteral("$ %1 %2").arg(process_->program(), args.join(QLatin1Char(' '))));
  return true;
}

void RunController::read_process_output(bool flush) {
  if (!process_) return;
  out_buffer_ += process_->readAllStandardOutput();
  err_buffer_ += process_->readAllStandardError();
  for (QByteArray* buffer : {&out_buffer_, &err_buffer_}) {
    qsizetype nl;
    while ((nl = buffer->indexOf('\n')) >= 0) {
      QByteArray line = buffer->left(nl);
      buffer->remove(0, nl + 1);
      if (line.endsWith('\r')) line.chop(1);
      emit logLine(QString::fromUtf8(line));
    }
    if (flush && !buffer->isEmpty()) {
      emit logLine(QString::fromUtf8(*buffer));
      buffer->clear();
    }
  }
}

void RunController::on_process_finished(int exit_code, bool crashed) {
  read_process_output(true);
  kill_timer_.stop();
  if (stopping_) {
    // Whatever mpirun left behind goes too (the user asked for the run to end).
    kill_process_group();
    finish(false, tr("stopped by the user"));
    return;
  }
  if (crashed) {
    end_ok_ = false;
    end_message_ = tr("mpirun crashed");
  } else if (exit_code != 0) {
    end_ok_ = false;
    end_message_ = tr("mpirun exited with status %1").arg(exit_code);
  } else {
    end_ok_ = true;
    end_message_ = tr("finished: %1 ranks (mpirun exited with status 0)").arg(world_);
  }
  ending_ = true;
  ending_deadline_ms_ = now_ms() + kDrainGraceMs;
  poll();
}

void RunController::stop() {
  if (!running_) return;
  switch (mode_) {
    case LaunchMode::threads:
      if (stop_request_) stop_request_->request();
      return;
    case LaunchMode::mpirun:
      if (stopping_ || !process_) return;
      stopping_ = true;
      if (process_->state() == QProcess::NotRunning) return;
      process_->terminate();
      kill_timer_.start(kKillAfterMs);
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
                if (e.seq == net::kCollectorSeq && first_lost_ < 0) first_lost_ = e.rank;
                emit logLine(QStringLiteral("rank %1 failed: %2").arg(e.rank).arg(qs(s->reason)));
              }
            },
            [](const auto&) {},
        },
        message);
  }
  return !messages.empty();
}

void RunController::poll() {
  if (!running_) return;
  if (mode_ == LaunchMode::threads) {
    const bool done = done_.load();  // read before draining: every event of a done run is queued
    if (drain()) emit updated();
    if (!done) return;
    if (thread_.joinable()) thread_.join();
    finish(ok_, qs(message_));
    return;
  }
  // Read before draining: when every connection had closed, all of their messages are queued.
  const uint64_t closed = closed_connections_.load();
  const bool all_closed = collector_ && closed >= collector_->stats().accepted;
  if (drain()) emit updated();
  // A rank whose connection was lost reconnected while the end was pending: not over yet.
  if (ending_ && mode_ == LaunchMode::remote && !model_.all_done()) ending_ = false;
  if (!ending_ && mode_ == LaunchMode::remote && model_.all_done()) {
    QStringList failed;
    for (const auto& [rank, state] : model_.ranks())
      if (state.state == telemetry::JobState::failed)
        failed << QStringLiteral("rank %1: %2").arg(rank).arg(qs(state.reason));
    end_ok_ = failed.isEmpty();
    end_message_ = failed.isEmpty() ? tr("finished: %1 ranks").arg(model_.ranks().size())
                                    : tr("%1 of %2 ranks failed (%3)")
                                          .arg(failed.size())
                                          .arg(model_.ranks().size())
                                          .arg(failed.join(QStringLiteral("; ")));
    ending_ = true;
    ending_deadline_ms_ = now_ms() + kDrainGraceMs;
    return;  // the next tick checks whether the connections have closed
  }
  if (ending_ && (all_closed || now_ms() >= ending_deadline_ms_)) {
    QString message = end_message_;
    if (!end_ok_ && mode_ == LaunchMode::mpirun) {
      // A failure a rank reported names the cause best; else the first connection lost (the
      // rank killed first; mpirun took the others with it).
      int named = -1;
      for (const auto& [rank, state] : model_.ranks())
        if (state.state == telemetry::JobState::failed && !state.connection_lost) {
          named = rank;
          break;
        }
      if (named < 0 && first_lost_ >= 0) named = first_lost_;
      if (const auto it = model_.ranks().find(named);
          it != model_.ranks().end() && it->second.state == telemetry::JobState::failed)
        message += tr("; rank %1 failed: %2").arg(named).arg(qs(it->second.reason));
    }
    finish(end_ok_, message);
  }
}

void RunController::finish(bool ok, const QString& message) {
  if (!running_) return;
  timer_.stop();
  kill_timer_.stop();
  QString text = message;
  if (collector_) collector_->stop();
  const bool more = drain();
  collector_.reset();
  try {
    if (recording_consumer_) recording_consumer_->writer().flush();
    if (recording_sink_) recording_sink_->flush();
  } catch (const std::exception& e) {
    text += tr(" (the recording failed: %1)").arg(QString::fromUtf8(e.what()));
  }
  recording_consumer_.reset();
  fanouts_.clear();
  recording_sink_.reset();
  shutdown_process();
  running_ = false;
  // A local mpirun that failed or was stopped took its ranks with it: a rank that never said it
  // finished or failed (killed, crashed) is marked failed with the reason, for the grid and log.
  const bool marked = mode_ == LaunchMode::mpirun && !ok && mark_unfinished_failed(text);
  if (more || marked) emit updated();
  emit finished(ok, text);
}

bool RunController::mark_unfinished_failed(const QString& reason) {
  std::vector<int> unfinished;
  for (const auto& [rank, state] : model_.ranks())
    // A lost connection is the collector's guess (killed or crashed?); when the user stopped the
    // run, that is what happened to it.
    if ((state.state != telemetry::JobState::finished &&
         state.state != telemetry::JobState::failed) ||
        (stopping_ && state.connection_lost))
      unfinished.push_back(rank);
  for (int rank : unfinished) {
    const double now = telemetry::now_seconds();
    telemetry::Event e;
    e.rank = rank;
    e.time = now;
    e.payload = telemetry::JobStateEvent{
        telemetry::JobState::failed, tr("ended without finishing: %1").arg(reason).toStdString()};
    model_.add(net::Message{std::move(e)}, now);
    emit logLine(tr("rank %1 ended without finishing (%2)").arg(rank).arg(reason));
  }
  return !unfinished.empty();
}

void RunController::kill_process_group() {
  if (process_pid_ <= 0) return;
  const pid_t pid = static_cast<pid_t>(process_pid_);
  std::vector<pid_t> victims = descendants(pid);
  for (pid_t p : processes_with(job_file_)) victims.push_back(p);
  ::kill(-pid, SIGKILL);
  for (pid_t p : victims) ::kill(p, SIGKILL);
  if (process_ && process_->state() != QProcess::NotRunning) process_->kill();
}

void RunController::shutdown_process() {
  if (!process_) return;
  disconnect(process_, nullptr, this, nullptr);
  // finish() may run inside one of the process's own signals: delete it later.
  if (process_->state() != QProcess::NotRunning) {
    process_->kill();
    process_->waitForFinished(1000);
  }
  process_->deleteLater();
  process_ = nullptr;
  process_pid_ = 0;
}

QString RunController::remoteCommand(bool srun) const {
  if (mode_ != LaunchMode::remote || job_file_.isEmpty() || port_ == 0) return {};
  QString host = advertise_host_;
  if (host.contains(QLatin1Char(':')) && !host.startsWith(QLatin1Char('[')))
    host = QStringLiteral("[%1]").arg(host);
  return QStringLiteral("%1 %2 %3 worker %4 --telemetry %5:%6 --token-file %7")
      .arg(srun ? QStringLiteral("srun -n") : QStringLiteral("mpirun -np"))
      .arg(world_)
      .arg(shell_quote(remote_shardlab_), shell_quote(job_file_), host)
      .arg(port_)
      .arg(shell_quote(token_file_));
}

}  // namespace shardlab::gui
