// JobEditor: edits a job as a form or as its JSON text (two tabs that stay in step) and validates
// it, as the user edits, with the engine's own job validation (the same code `shardlab run` uses):
// the form shows each problem beside its field, the line below both tabs the first one.
#pragma once

#include <QLabel>
#include <QPlainTextEdit>
#include <QTabWidget>
#include <QTimer>
#include <QWidget>

#include "engine/job/job_spec.h"
#include "gui/job_form.h"

namespace shardlab::gui {

class JobEditor : public QWidget {
  Q_OBJECT
 public:
  explicit JobEditor(QWidget* parent = nullptr);

  QString text() const;
  // Replaces the JSON text (and, when it parses, the form's fields) and validates it.
  void setText(const QString& json);
  // Validates now (instead of after the typing pause) and returns whether the job is valid.
  bool validateNow();
  bool isValid() const { return valid_; }
  // Empty when valid; otherwise the engine's message, e.g. "optimizer.lr: must be > 0, got -1".
  QString problem() const { return problem_; }
  // One line describing a valid job (model, optimizer, run length).
  QString summary() const { return summary_; }
  // The job as last validated (meaningful while isValid()).
  const JobSpec& job() const { return job_; }

  JobForm* form() const { return form_; }
  // How to launch the job's ranks (the form's Launch choice) and, for remote workers, where the
  // app listens.
  LaunchChoice launchChoice() const { return form_->launchChoice(); }
  QString listenAddress() const { return form_->listenAddress(); }
  QString hosts() const { return form_->hosts(); }

 signals:
  void validityChanged(bool valid, const QString& problemOrSummary);
  // After every validation that found the job valid (its fields may have changed).
  void jobChanged();

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  // A form edit: the text becomes the form's document, pretty-printed.
  void formChanged();

  QTabWidget* tabs_;
  JobForm* form_;
  QWidget* viewport_;
  QPlainTextEdit* edit_;
  QLabel* status_;
  QTimer debounce_;
  bool valid_ = false;
  bool writing_text_ = false;  // the text is being rewritten from the form
  bool from_form_ = false;     // validating a form edit: the form already shows it
  QString problem_;
  QString summary_;
  JobSpec job_;
};

}  // namespace shardlab::gui
