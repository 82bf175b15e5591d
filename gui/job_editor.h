// JobEditor: edits a job file's JSON and validates it, as the user types, with the engine's own
// job validation (the same code `shardlab run` uses), showing the first problem by field path.
#pragma once

#include <QLabel>
#include <QPlainTextEdit>
#include <QTimer>
#include <QWidget>

#include "engine/job/job_spec.h"

namespace shardlab::gui {

class JobEditor : public QWidget {
  Q_OBJECT
 public:
  explicit JobEditor(QWidget* parent = nullptr);

  QString text() const;
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

 signals:
  void validityChanged(bool valid, const QString& problemOrSummary);
  // After every validation that found the job valid (its fields may have changed).
  void jobChanged();

 private:
  QPlainTextEdit* edit_;
  QLabel* status_;
  QTimer debounce_;
  bool valid_ = false;
  QString problem_;
  QString summary_;
  JobSpec job_;
};

}  // namespace shardlab::gui
