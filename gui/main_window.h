// MainWindow: the app's frame — a job editor with Open / Save / Save As. Saving never overwrites
// a file with something that failed to write: data goes to a temporary file first (QSaveFile).
#pragma once

#include <QMainWindow>

#include "gui/job_editor.h"

namespace shardlab::gui {

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  explicit MainWindow(QWidget* parent = nullptr);

  JobEditor* editor() const { return editor_; }
  // Return false and show why (status bar) when the file cannot be read or written.
  bool openFile(const QString& path);
  bool saveFile(const QString& path);
  QString currentFile() const { return file_; }

 private:
  JobEditor* editor_;
  QString file_;
};

}  // namespace shardlab::gui
