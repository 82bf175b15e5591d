// MainWindow: the app's frame — a job editor with Open / Save / Save As beside the rank grid of
// the job's topology and the planner's per-rank memory, both updated whenever the edited job is
// valid. Saving never overwrites a file with something that failed to write: data goes to a
// temporary file first (QSaveFile). Run > Start runs the edited job (a threads job, RunController)
// and draws rank 0's loss (LossChart, under the memory view) and every rank's measured memory live;
// the status bar says when it ends and how.
#pragma once

#include <QMainWindow>

#include "gui/job_editor.h"
#include "gui/loss_chart.h"
#include "gui/memory_view.h"
#include "gui/rank_grid.h"
#include "gui/run_controller.h"

namespace shardlab::gui {

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  explicit MainWindow(QWidget* parent = nullptr);

  JobEditor* editor() const { return editor_; }
  RankGrid* rankGrid() const { return grid_; }
  MemoryView* memoryView() const { return memory_; }
  LossChart* lossChart() const { return loss_; }
  RunController* runController() const { return run_; }
  // Run > Start: starts the edited job when it is valid; false (status bar says why) otherwise.
  bool startRun();
  // Return false and show why (status bar) when the file cannot be read or written.
  bool openFile(const QString& path);
  bool saveFile(const QString& path);
  QString currentFile() const { return file_; }

 private:
  // The edited job changed and is valid: redraw the grid and the memory plan.
  void showJob();

  JobEditor* editor_;
  RankGrid* grid_;
  MemoryView* memory_;
  LossChart* loss_;
  RunController* run_;
  QString file_;
};

}  // namespace shardlab::gui
