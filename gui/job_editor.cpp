#include "gui/job_editor.h"

#include <QFontDatabase>
#include <QVBoxLayout>

#include "engine/core/error.h"
#include "engine/job/job_spec.h"

namespace shardlab::gui {

JobEditor::JobEditor(QWidget* parent) : QWidget(parent) {
  edit_ = new QPlainTextEdit(this);
  edit_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  edit_->setObjectName("jobText");
  status_ = new QLabel(this);
  status_->setObjectName("jobStatus");
  status_->setWordWrap(true);
  status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(edit_, 1);
  layout->addWidget(status_);

  // Validate after a short typing pause, not on every keystroke.
  debounce_.setSingleShot(true);
  debounce_.setInterval(300);
  connect(&debounce_, &QTimer::timeout, this, &JobEditor::validateNow);
  connect(edit_, &QPlainTextEdit::textChanged, &debounce_, qOverload<>(&QTimer::start));
}

QString JobEditor::text() const {
  return edit_->toPlainText();
}

void JobEditor::setText(const QString& json) {
  edit_->setPlainText(json);
  validateNow();
}

bool JobEditor::validateNow() {
  debounce_.stop();
  const bool was_valid = valid_;
  problem_.clear();
  summary_.clear();
  try {
    // The same parser and validation as `shardlab run`, so both report a job identically.
    job_ = job_from_json(parse_job_json(text().toStdString(), "editor"));
    const JobSpec& job = job_;
    summary_ = QString::fromStdString(
        fmt::format("{}: {} model, {} lr {:g}, {} steps of batch {}", job.name, job.model.kind,
                    job.optimizer.name, job.optimizer.lr, job.train.steps, job.train.batch_size));
    valid_ = true;
  } catch (const Error& e) {
    problem_ = QString::fromUtf8(e.what());
    valid_ = false;
  }
  status_->setText(valid_ ? tr("Valid job — %1").arg(summary_) : problem_);
  status_->setStyleSheet(valid_ ? "color: #1b5e20;" : "color: #b71c1c;");
  if (valid_ != was_valid || !valid_) emit validityChanged(valid_, valid_ ? summary_ : problem_);
  if (valid_) emit jobChanged();
  return valid_;
}

}  // namespace shardlab::gui
