#include "gui/job_editor.h"

#include <QEvent>
#include <QFontDatabase>
#include <QScrollArea>
#include <QScrollBar>
#include <QVBoxLayout>
#include <exception>

#include "engine/core/error.h"
#include "engine/job/job_spec.h"

namespace shardlab::gui {

JobEditor::JobEditor(QWidget* parent) : QWidget(parent) {
  form_ = new JobForm;
  form_->setObjectName("jobForm");
  auto* scroll = new QScrollArea;
  scroll->setWidget(form_);
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  scroll->viewport()->installEventFilter(this);  // resizes: one or two columns of sections
  viewport_ = scroll->viewport();

  edit_ = new QPlainTextEdit;
  edit_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  edit_->setObjectName("jobText");

  tabs_ = new QTabWidget(this);
  tabs_->setObjectName("jobTabs");
  tabs_->addTab(scroll, tr("Form"));
  tabs_->addTab(edit_, tr("JSON"));

  status_ = new QLabel(this);
  status_->setObjectName("jobStatus");
  status_->setWordWrap(true);
  status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(tabs_, 1);
  layout->addWidget(status_);

  // Validate after a short typing pause, not on every keystroke.
  debounce_.setSingleShot(true);
  debounce_.setInterval(300);
  connect(&debounce_, &QTimer::timeout, this, &JobEditor::validateNow);
  connect(edit_, &QPlainTextEdit::textChanged, this, [this] {
    if (!writing_text_) debounce_.start();
  });
  connect(form_, &JobForm::documentChanged, this, &JobEditor::formChanged);
  // Leaving the JSON tab with typing not yet validated: bring the form up to date first.
  connect(tabs_, &QTabWidget::currentChanged, this, [this] {
    if (debounce_.isActive()) validateNow();
  });
}

bool JobEditor::eventFilter(QObject* watched, QEvent* event) {
  if (watched == viewport_ && event->type() == QEvent::Resize) form_->fitWidth(viewport_->width());
  return QWidget::eventFilter(watched, event);
}

QString JobEditor::text() const {
  return edit_->toPlainText();
}

void JobEditor::setText(const QString& json) {
  edit_->setPlainText(json);
  validateNow();
}

void JobEditor::formChanged() {
  const int scrolled = edit_->verticalScrollBar()->value();
  writing_text_ = true;
  edit_->setPlainText(QString::fromStdString(form_->orderedDocument().dump(2) + "\n"));
  writing_text_ = false;
  edit_->verticalScrollBar()->setValue(scrolled);
  from_form_ = true;
  validateNow();
  from_form_ = false;
}

bool JobEditor::validateNow() {
  debounce_.stop();
  const bool was_valid = valid_;
  problem_.clear();
  summary_.clear();
  const std::string text = this->text().toStdString();
  bool parsed = false;
  try {
    // The same parser and validation as `shardlab run`, so both report a job identically.
    const nlohmann::json doc = parse_job_json(text, "editor");
    parsed = true;
    job_ = job_from_json(doc);
    const JobSpec& job = job_;
    summary_ = QString::fromStdString(
        fmt::format("{}: {} model, {} lr {:g}, {} steps of batch {}", job.name, job.model.kind,
                    job.optimizer.name, job.optimizer.lr, job.train.steps, job.train.batch_size));
    valid_ = true;
  } catch (const Error& e) {
    problem_ = QString::fromUtf8(e.what());
    valid_ = false;
  } catch (const std::exception& e) {
    // Not expected (the engine reports bad input as an Error), but an exception leaving a Qt slot
    // aborts the app: whatever the text holds, the editor shows it as the job's problem instead.
    problem_ = tr("cannot read the job: %1").arg(QString::fromUtf8(e.what()));
    valid_ = false;
  }

  // Text -> form (a form edit's text is the form's document already). Text that is not JSON
  // leaves the form as it was, showing why.
  if (!from_form_) {
    if (!parsed) {
      form_->setParseError(problem_);
    } else {
      // The text's key order is kept for the form's later rewrites of it. parse_job_json took the
      // text, so its nesting and numbers are within the limits (engine/core/json_limits.h) that
      // make the copies and comparisons below safe.
      try {
        const auto ordered = nlohmann::ordered_json::parse(text);
        if (ordered != form_->orderedDocument() || form_->hasParseError())
          form_->setOrderedDocument(ordered);
      } catch (const std::exception& e) {  // parse_job_json took it: not expected
        form_->setParseError(QString::fromUtf8(e.what()));
      }
    }
  }

  status_->setText(valid_ ? tr("Valid job — %1").arg(summary_) : problem_);
  status_->setStyleSheet(valid_ ? "color: #1b5e20;" : "color: #b71c1c;");
  if (valid_ != was_valid || !valid_) emit validityChanged(valid_, valid_ ? summary_ : problem_);
  if (valid_) emit jobChanged();
  return valid_;
}

}  // namespace shardlab::gui
