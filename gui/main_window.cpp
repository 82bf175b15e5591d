#include "gui/main_window.h"

#include <QFile>
#include <QFileDialog>
#include <QMenuBar>
#include <QSaveFile>
#include <QSplitter>
#include <QStatusBar>

#include "engine/job/job_spec.h"
#include "engine/parallel/topology.h"

namespace shardlab::gui {

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
  editor_ = new JobEditor(this);
  grid_ = new RankGrid(this);
  memory_ = new MemoryView(this);
  loss_ = new LossChart(this);
  run_ = new RunController(this);
  auto* views = new QSplitter(Qt::Vertical, this);
  views->addWidget(grid_);
  views->addWidget(memory_);
  views->addWidget(loss_);
  auto* main = new QSplitter(Qt::Horizontal, this);
  main->addWidget(editor_);
  main->addWidget(views);
  setCentralWidget(main);
  connect(editor_, &JobEditor::jobChanged, this, &MainWindow::showJob);
  setWindowTitle(tr("ShardLab"));
  resize(1400, 800);

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

  QMenu* run = menuBar()->addMenu(tr("&Run"));
  run->addAction(tr("&Start"), this, [this] { startRun(); });
  connect(run_, &RunController::updated, this, [this] {
    loss_->update(run_->model());
    memory_->setMeasured(run_->model());
  });
  connect(run_, &RunController::finished, this, [this](bool ok, const QString& message) {
    statusBar()->showMessage(ok ? tr("Run %1").arg(message) : tr("Run failed: %1").arg(message));
  });
}

bool MainWindow::startRun() {
  if (!editor_->validateNow()) {
    statusBar()->showMessage(tr("Cannot start: %1").arg(editor_->problem()));
    return false;
  }
  if (!run_->start(editor_->job())) {
    statusBar()->showMessage(tr("Cannot start: %1").arg(run_->lastError()));
    return false;
  }
  loss_->update(run_->model());  // empty: the previous run's curve goes
  statusBar()->showMessage(tr("Running…"));
  return true;
}

void MainWindow::showJob() {
  try {
    const JobSpec& job = editor_->job();
    const ParallelConfig& p = job.parallel;
    const int world = p.strategy == "none" ? 1 : static_cast<int>(p.world_size);
    grid_->setTopology(uses_model_parallelism(p) ? Topology::make({p.pp, p.tp, p.dp}, world)
                                                 : Topology::make({1, 1, world}, world));
    memory_->setJob(job);
  } catch (const std::exception& e) {
    // The editor said valid; a view that cannot show it says why instead of going stale.
    statusBar()->showMessage(tr("Cannot show the job: %1").arg(QString::fromUtf8(e.what())));
  }
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
