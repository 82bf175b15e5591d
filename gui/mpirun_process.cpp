#include "gui/mpirun_process.h"

#include <unistd.h>

#include <QProcess>

#include "engine/launch/process_tree.h"

namespace shardlab::gui {

MpirunProcess::MpirunProcess(std::string job_file, QObject* parent)
    : QObject(parent), job_file_(std::move(job_file)), process_(new QProcess(this)) {
  kill_timer_.setSingleShot(true);
  connect(&kill_timer_, &QTimer::timeout, this, [this] {
    emit line(tr("mpirun did not end within %1 s of SIGTERM: killing it and its ranks")
                  .arg(kKillAfterMs / 1000));
    kill_all();
  });
  connect(process_, &QProcess::readyReadStandardOutput, this, [this] { read_output(false); });
  connect(process_, &QProcess::readyReadStandardError, this, [this] { read_output(false); });
  connect(process_, &QProcess::finished, this, [this](int code, QProcess::ExitStatus status) {
    read_output(true);
    kill_timer_.stop();
    emit exited(code, status == QProcess::CrashExit);
  });
  connect(process_, &QProcess::errorOccurred, this, [this](QProcess::ProcessError e) {
    if (e == QProcess::FailedToStart)
      emit failedToStart(
          tr("Cannot start %1: %2").arg(process_->program(), process_->errorString()));
  });
}

MpirunProcess::~MpirunProcess() {
  disconnect(process_, nullptr, this, nullptr);
  kill_timer_.stop();
  if (process_->state() == QProcess::NotRunning) return;
  process_->terminate();
  if (!process_->waitForFinished(3000)) {
    kill_all();
    process_->waitForFinished(2000);
  }
}

bool MpirunProcess::start(const std::vector<std::string>& argv,
                          const std::vector<std::pair<std::string, std::string>>& env,
                          QString* error) {
  QStringList args;
  for (size_t i = 1; i < argv.size(); ++i) args << QString::fromStdString(argv[i]);
  process_->setProgram(QString::fromStdString(argv.front()));
  process_->setArguments(args);
  QProcessEnvironment e = QProcessEnvironment::systemEnvironment();
  for (const auto& [name, value] : env)
    e.insert(QString::fromStdString(name), QString::fromStdString(value));
  process_->setProcessEnvironment(e);
  // Its own process group, so a kill reaches what it started in that group too.
  process_->setChildProcessModifier([] { ::setpgid(0, 0); });
  process_->start();
  if (process_->state() == QProcess::NotRunning) {
    *error = tr("Cannot start %1: %2").arg(process_->program(), process_->errorString());
    return false;
  }
  pid_ = process_->processId();
  emit line(QStringLiteral("$ %1 %2").arg(process_->program(), args.join(QLatin1Char(' '))));
  return true;
}

bool MpirunProcess::terminate() {
  if (process_->state() == QProcess::NotRunning) return false;
  process_->terminate();
  kill_timer_.start(kKillAfterMs);
  return true;
}

void MpirunProcess::kill_all() {
  if (pid_ <= 0) return;
  launch::kill_run_processes(static_cast<pid_t>(pid_), job_file_);
  if (process_->state() != QProcess::NotRunning) process_->kill();
}

void MpirunProcess::release() {
  disconnect(process_, nullptr, this, nullptr);
  kill_timer_.stop();
  if (process_->state() != QProcess::NotRunning) {
    process_->kill();
    process_->waitForFinished(1000);
  }
}

void MpirunProcess::read_output(bool flush) {
  out_ += process_->readAllStandardOutput();
  err_ += process_->readAllStandardError();
  for (QByteArray* buffer : {&out_, &err_}) {
    qsizetype nl;
    while ((nl = buffer->indexOf('\n')) >= 0) {
      QByteArray text = buffer->left(nl);
      buffer->remove(0, nl + 1);
      if (text.endsWith('\r')) text.chop(1);
      emit line(QString::fromUtf8(text));
    }
    if (flush && !buffer->isEmpty()) {
      emit line(QString::fromUtf8(*buffer));
      buffer->clear();
    }
  }
}

}  // namespace shardlab::gui
