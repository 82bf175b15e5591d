#include "gui/main_window.h"

#include <QFile>
#include <QFileDialog>
#include <QMenuBar>
#include <QSaveFile>
#include <QStatusBar>

namespace shardlab::gui {

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
  editor_ = new JobEditor(this);
  setCentralWidget(editor_);
  setWindowTitle(tr("ShardLab"));
  resize(900, 700);

  QMenu* file = menuBar()->addMenu(tr("&File"));
  file->addAction(tr("&Open…"), QKeySequence::Open, this, [this] {
    const QString p = QFileDialog::getOpenFileName(this, tr("Open job"), {}, tr("Jobs (*.json)"));
    if (!p.isEmpty()) openFile(p);
  });
  file->addAction(tr("&Save"), QKeySequence::Save, this, [this] {
    QString p = file_;
    if (p.isEmpty())
      p = QFileDialog::getSaveFileName(this, tr("Save job"), {}, tr("Jobs (*.json)"));
    if (!p.isEmpty()) saveFile(p);
  });
  file->addAction(tr("Save &As…"), QKeySequence::SaveAs, this, [this] {
    const QString p =
        QFileDialog::getSaveFileName(this, tr("Save job"), file_, tr("Jobs (*.json)"));
    if (!p.isEmpty()) saveFile(p);
  });
  file->addSeparator();
  file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);
}

bool MainWindow::openFile(const QString& path) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly | QIODevice::Text)) {
    statusBar()->showMessage(tr("Cannot open %1: %2").arg(path, f.errorString()));
    return false;
  }
  editor_->setText(QString::fromUtf8(f.readAll()));
  file_ = path;
  setWindowTitle(tr("ShardLab — %1").arg(path));
  statusBar()->showMessage(tr("Opened %1").arg(path));
  return true;
}

bool MainWindow::saveFile(const QString& path) {
  QSaveFile f(path);
  if (!f.open(QIODevice::WriteOnly | QIODevice::Text) || f.write(editor_->text().toUtf8()) < 0 ||
      !f.commit()) {
    statusBar()->showMessage(tr("Cannot save %1: %2").arg(path, f.errorString()));
    return false;
  }
  file_ = path;
  setWindowTitle(tr("ShardLab — %1").arg(path));
  statusBar()->showMessage(tr("Saved %1").arg(path));
  return true;
}

}  // namespace shardlab::gui
