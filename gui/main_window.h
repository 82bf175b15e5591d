// MainWindow: the app's frame — a job editor with Open / Save / Save As beside the rank grid of
// the job's topology and the planner's per-rank memory, both updated whenever the edited job is
// valid. Saving never overwrites a file with something that failed to write: data goes to a
// temporary file first (QSaveFile).
#pragma once

#include <QMainWindow>

#include "gui/job_editor.h"
#include "gui/memory_view.h"
#include "gui/rank_grid.h"

namespace shardlab::gui {

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  explicit MainWindow(QWidget* parent = nullptr);

  JobEditor* editor() const { return editor_; }
  RankGrid* rankGrid() const { return grid_; }
  MemoryView* memoryView() const { return memory_; }
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
  QString file_;
};

}  // namespace shardlab::gui
