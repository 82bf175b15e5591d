#include "gui/main_window.h"

#include <QApplication>
#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QMenuBar>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSaveFile>
#include <QScrollArea>
#include <QSignalBlocker>
#include <QSlider>
#include <QSpinBox>
#include <QSplitter>
#include <QStatusBar>
#include <QTabWidget>
#include <QToolBar>
#include <QVBoxLayout>

#include <algorithm>
#include <limits>
#include <vector>

#include "engine/job/job_spec.h"
#include "engine/launch/job_topology.h"
#include "engine/telemetry/events.h"
#include "engine/topology/topology.h"
#include "gui/cluster_check.h"
#include "gui/export.h"

namespace shardlab::gui {

namespace {

constexpr int kScrubSteps = 1000;
// A group whose latest collective ended this long before "now" is no longer shown as talking.
constexpr double kCommunicatingSeconds = 0.5;

LaunchMode mode_of(LaunchChoice choice) {
  switch (choice) {
    case LaunchChoice::mpirun:
      return LaunchMode::mpirun;
    case LaunchChoice::remote:
      return LaunchMode::remote;
    case LaunchChoice::threads:
      break;
  }
  return LaunchMode::threads;
}

QWidget* labelled(const QString& title, QWidget* content, QWidget* extra = nullptr) {
  auto* box = new QWidget;
  auto* layout = new QVBoxLayout(box);
  layout->setContentsMargins(4, 4, 4, 4);
  auto* head = new QHBoxLayout;
  auto* label = new QLabel(QStringLiteral("<b>%1</b>").arg(title));
  head->addWidget(label);
  head->addStretch();
  if (extra != nullptr) head->addWidget(extra);
  layout->addLayout(head);
  layout->addWidget(content, 1);
  return box;
}

}  // namespace

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
  editor_ = new JobEditor(this);
  run_ = new RunController(this);
  replay_ = new ReplayController(this);
  buildViews();

  auto* main = new QSplitter(Qt::Horizontal, this);
  main->addWidget(editor_);
  auto* right = new QWidget;
  auto* right_layout = new QVBoxLayout(right);
  right_layout->setContentsMargins(0, 0, 0, 0);
  teaching_ = new TeachingBar;  // shown for a teaching run only
  right_layout->addWidget(teaching_);
  right_layout->addWidget(views_, 1);
  right_layout->addWidget(replay_bar_);
  main->addWidget(right);
  main->setStretchFactor(0, 0);
  main->setStretchFactor(1, 1);
  main->setSizes({440, 1160});
  setCentralWidget(main);
  setWindowTitle(tr("ShardLab"));
  resize(1600, 1000);
  buildMenus();
  // Permanent: the transient messages (connected, saved, run finished) must not hide it.
  diagnosis_ = new QLabel;
  diagnosis_->setObjectName(QStringLiteral("diagnosis"));
  diagnosis_->setTextFormat(Qt::PlainText);
  diagnosis_->hide();
  statusBar()->addPermanentWidget(diagnosis_);
  setRunning(false);

  // While a run goes, the grid and the memory plan stay those of the job that runs.
  connect(editor_, &JobEditor::jobChanged, this, [this] {
    if (!run_->running()) showJob();
  });
  connect(run_, &RunController::updated, this, [this] {
    teaching_->refresh();
    showRun(run_->model(), telemetry::now_seconds(), false);
  });
  // Silence shows without any traffic (a hung rank sends nothing): re-judge every second.
  flags_timer_.setInterval(1000);
  connect(&flags_timer_, &QTimer::timeout, this,
          [this] { markRanks(run_->model(), telemetry::now_seconds()); });
  connect(views_, &QTabWidget::currentChanged, this, [this] {
    if (replaying_)
      showRun(replay_->model(), replay_->position(), true);
    else
      showRun(run_->model(), telemetry::now_seconds(), true);
  });
  connect(run_, &RunController::logLine, this, &MainWindow::appendLog);
  connect(run_, &RunController::workerConnected, this, [this](int rank) {
    ++connected_;
    statusBar()->showMessage(tr("Rank %1 connected (%2 so far)").arg(rank).arg(connected_));
  });
  connect(run_, &RunController::finished, this, [this](bool ok, const QString& message) {
    teaching_->setGate(nullptr);
    showRun(run_->model(), telemetry::now_seconds(), true);
    setRunning(false);
    const QString text = ok ? tr("Run %1").arg(message) : tr("Run failed: %1").arg(message);
    appendLog(text);
    if (!run_->recordingPath().isEmpty())
      appendLog(tr("Recorded to %1 (File > Open recording replays it)").arg(run_->recordingPath()));
    statusBar()->showMessage(text);
  });
  connect(replay_, &ReplayController::updated, this, [this] {
    showRun(replay_->model(), replay_->position(), false);
    updateReplayBar();
  });
  connect(replay_, &ReplayController::finished, this, [this] { play_->setText(tr("Play")); });
}

void MainWindow::buildViews() {
  grid_ = new RankGrid;
  memory_ = new MemoryView;
  loss_ = new LossChart;
  heat_ = new CommHeatMap;
  table_ = new CommTable;
  timeline_ = new TimelineView;
  views_ = new QTabWidget;

  grid_shade_ = new QComboBox;
  grid_shade_->setObjectName(QStringLiteral("gridShade"));
  grid_shade_->addItem(tr("colour: wait share"), static_cast<int>(GridShade::wait));
  grid_shade_->addItem(tr("colour: compute share"), static_cast<int>(GridShade::compute));
  grid_shade_->setToolTip(
      tr("What colours each rank during a run: the part of its last steps' time it spent waiting "
         "for other ranks, or computing"));
  connect(grid_shade_, &QComboBox::currentIndexChanged, this, [this](int i) {
    setGridShade(static_cast<GridShade>(grid_shade_->itemData(i).toInt()));
  });
  auto* top = new QSplitter(Qt::Horizontal);
  top->addWidget(labelled(tr("Ranks (pp × tp × dp)"), grid_, grid_shade_));
  top->addWidget(labelled(tr("Memory per rank: planned | measured"), memory_));
  auto* overview = new QSplitter(Qt::Vertical);
  overview->addWidget(top);
  overview->addWidget(labelled(tr("Loss and evaluation"), loss_));
  overview->setSizes({520, 420});
  views_->addTab(overview, tr("Overview"));

  heat_metric_ = new QComboBox;
  heat_metric_->setObjectName(QStringLiteral("heatMetric"));
  for (net::StepMetric m : {net::StepMetric::wait, net::StepMetric::transfer,
                            net::StepMetric::compute, net::StepMetric::comm})
    heat_metric_->addItem(
        m == net::StepMetric::comm ? tr("all communication") : CommHeatMap::metricName(m),
        static_cast<int>(m));
  heat_metric_->setToolTip(
      tr("wait: blocked until the last rank arrived; transfer: the rest of each collective; "
         "compute: forward, backward and optimizer"));
  connect(heat_metric_, &QComboBox::currentIndexChanged, this, [this](int i) {
    setHeatMetric(static_cast<net::StepMetric>(heat_metric_->itemData(i).toInt()));
  });
  auto* comm = new QSplitter(Qt::Vertical);
  comm->addWidget(labelled(tr("Seconds per rank and step"), heat_, heat_metric_));
  comm->addWidget(labelled(tr("Per collective and group"), table_));
  comm->setSizes({470, 470});
  views_->addTab(comm, tr("Communication"));

  auto* steps = new QSpinBox;
  steps->setRange(1, 50);
  steps->setValue(timeline_->steps());
  steps->setPrefix(tr("last "));
  steps->setSuffix(tr(" steps"));
  connect(steps, &QSpinBox::valueChanged, this, [this](int n) {
    timeline_->setSteps(n);
    timeline_->update(replaying_ ? replay_->model() : run_->model());
  });
  views_->addTab(labelled(tr("Timeline: forward, backward, optimizer, collectives; gaps are idle"),
                          timeline_, steps),
                 tr("Timeline"));

  auto* log_page = new QWidget;
  auto* log_layout = new QVBoxLayout(log_page);
  remote_box_ = new QWidget;
  auto* remote_layout = new QVBoxLayout(remote_box_);
  remote_layout->setContentsMargins(0, 0, 0, 0);
  remote_layout->addWidget(new QLabel(
      tr("<b>Remote workers</b>: copy the job file and the token file named in the command to "
         "the cluster (same paths; keep the token file mode 0600), then run one of these there; "
         "workers appear as they connect.")));
  remote_mpirun_ = new QLineEdit;
  remote_srun_ = new QLineEdit;
  for (QLineEdit* e : {remote_mpirun_, remote_srun_}) {
    e->setReadOnly(true);
    e->setFont(QFont(QStringLiteral("monospace")));
    remote_layout->addWidget(e);
  }
  remote_box_->hide();
  log_ = new QPlainTextEdit;
  log_->setReadOnly(true);
  log_->setMaximumBlockCount(20000);
  log_->setFont(QFont(QStringLiteral("monospace")));
  log_layout->addWidget(remote_box_);
  log_layout->addWidget(log_, 1);
  views_->addTab(log_page, tr("Log"));

  plan_ = new PlanView;
  views_->addTab(plan_, tr("Plan"));
  // "Open as job": the layout at this machine's scale into the editor, as an unsaved job.
  connect(plan_, &PlanView::openJob, this, [this](const QString& json, const QString& changes) {
    editor_->setText(json);
    file_.clear();
    setWindowTitle(tr("ShardLab — %1 (from the plan, not saved)")
                       .arg(QString::fromStdString(editor_->job().name)));
    statusBar()->showMessage(changes.isEmpty()
                                 ? tr("Opened the plan's layout as a job")
                                 : tr("Opened the plan's layout as a job: %1").arg(changes));
  });

  // One strip per rank: taller than the window with many ranks, so it scrolls.
  holdings_ = new HoldingsView;
  auto* holdings_scroll = new QScrollArea;
  holdings_scroll->setWidget(holdings_);
  holdings_scroll->setWidgetResizable(true);
  holdings_scroll->setFrameShape(QFrame::NoFrame);
  scrubber_ = new StepScrubber;
  connect(scrubber_, &StepScrubber::frameChanged, holdings_, &HoldingsView::setFrame);
  auto* holdings_page = new QWidget;
  auto* holdings_column = new QVBoxLayout(holdings_page);
  holdings_column->setContentsMargins(0, 0, 0, 0);
  holdings_column->addWidget(scrubber_);
  holdings_column->addWidget(holdings_scroll, 1);
  views_->addTab(labelled(tr("Who holds what: each rank's parameters, gradients and optimizer "
                             "state over the model's flat layout"),
                          holdings_page),
                 tr("Who holds what"));

  replay_bar_ = new QWidget;
  auto* bar = new QHBoxLayout(replay_bar_);
  bar->setContentsMargins(4, 0, 4, 4);
  play_ = new QPushButton(tr("Play"));
  scrub_ = new QSlider(Qt::Horizontal);
  scrub_->setRange(0, kScrubSteps);
  replay_label_ = new QLabel;
  bar->addWidget(play_);
  bar->addWidget(scrub_, 1);
  bar->addWidget(replay_label_);
  replay_bar_->hide();
  connect(play_, &QPushButton::clicked, this, [this] {
    if (replay_->playing()) {
      replay_->pause();
      play_->setText(tr("Play"));
    } else {
      replay_->play(1.0);
      play_->setText(tr("Pause"));
    }
  });
  // Seeks on release (and on clicks and keys), not at every pixel of a drag: going back rebuilds
  // the model from the start of the recording.
  scrub_->setTracking(false);
  connect(scrub_, &QSlider::valueChanged, this, [this](int v) {
    const double span = replay_->endTime() - replay_->startTime();
    replay_->seek(replay_->startTime() + span * v / kScrubSteps);
  });
}

void MainWindow::buildMenus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  QAction* open = file->addAction(tr("&Open job…"), QKeySequence::Open, this, [this] {
    const QString p = QFileDialog::getOpenFileName(this, tr("Open job"), {}, tr("Jobs (*.json)"));
    if (!p.isEmpty()) openFile(p);
  });
  QAction* save = file->addAction(tr("&Save job"), QKeySequence::Save, this, [this] {
    QString p = file_;
    if (p.isEmpty())
      p = QFileDialog::getSaveFileName(this, tr("Save job"), {}, tr("Jobs (*.json)"));
    if (!p.isEmpty()) saveFile(p);
  });
  file->addAction(tr("Save job &as…"), QKeySequence::SaveAs, this, [this] {
    const QString p =
        QFileDialog::getSaveFileName(this, tr("Save job"), file_, tr("Jobs (*.json)"));
    if (!p.isEmpty()) saveFile(p);
  });
  file->addSeparator();
  QAction* recording = file->addAction(tr("Open &recording…"), this, [this] {
    const QString p =
        QFileDialog::getOpenFileName(this, tr("Open recording"), {}, tr("Recordings (*.slrec)"));
    if (!p.isEmpty()) openRecording(p);
  });
  file->addAction(tr("Replay the &last run"), this, [this] {
    if (run_->recordingPath().isEmpty())
      statusBar()->showMessage(tr("No run has been recorded yet"));
    else
      openRecording(run_->recordingPath());
  });
  file->addSeparator();
  QAction* png = file->addAction(tr("Export view as &PNG…"), this, &MainWindow::exportPng);
  QMenu* csv = file->addMenu(tr("Export series as &CSV"));
  csv->addAction(tr("Loss and evaluation…"), this, [this] { exportCsv(tr("loss"), loss_->csv()); });
  csv->addAction(tr("Communication per collective and group…"), this,
                 [this] { exportCsv(tr("communication"), table_->csv()); });
  csv->addAction(tr("Communication heat map…"), this,
                 [this] { exportCsv(tr("heat-map"), heat_->csv()); });
  csv->addAction(tr("Timeline…"), this, [this] { exportCsv(tr("timeline"), timeline_->csv()); });
  file->addSeparator();
  file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);

  QMenu* run = menuBar()->addMenu(tr("&Run"));
  start_action_ = run->addAction(tr("&Start"), QKeySequence(Qt::CTRL | Qt::Key_R), this,
                                 [this] { startRun(); });
  stop_action_ = run->addAction(tr("S&top"), QKeySequence(Qt::CTRL | Qt::Key_Period), this,
                                [this] { stopRun(); });
  run->addSeparator();
  run->addAction(tr("&Check the hosts…"), this, [this] { checkHosts(); });
  run->addAction(tr("&Plan a large job…"), this, [this] {
    views_->setCurrentIndex(kPlan);
    plan_->setFocus();
  });

  QToolBar* tools = addToolBar(tr("Main"));
  tools->setMovable(false);
  tools->addAction(open);
  tools->addAction(save);
  tools->addSeparator();
  tools->addAction(start_action_);
  tools->addAction(stop_action_);
  tools->addSeparator();
  tools->addAction(recording);
  tools->addAction(png);
}

QString MainWindow::logText() const {
  return log_->toPlainText();
}
QString MainWindow::diagnosisText() const {
  return diagnosis_->text();
}

const net::RunModel& MainWindow::shownModel() const {
  return replaying_ ? replay_->model() : run_->model();
}

void MainWindow::setGridShade(GridShade shade) {
  shade_ = shade;
  const int i = grid_shade_->findData(static_cast<int>(shade));
  if (i != grid_shade_->currentIndex()) {
    const QSignalBlocker quiet(grid_shade_);  // this is where the change is handled
    grid_shade_->setCurrentIndex(i);
  }
  if (grid_->hasTopology()) showShares(shownModel());
}

void MainWindow::setHeatMetric(net::StepMetric metric) {
  const int i = heat_metric_->findData(static_cast<int>(metric));
  if (i != heat_metric_->currentIndex()) {
    const QSignalBlocker quiet(heat_metric_);
    heat_metric_->setCurrentIndex(i);
  }
  heat_->setMetric(metric);
  heat_->update(shownModel());
}
QString MainWindow::remoteMpirunCommand() const {
  return remote_mpirun_->text();
}
QString MainWindow::remoteSrunCommand() const {
  return remote_srun_->text();
}

void MainWindow::setRunning(bool running) {
  start_action_->setEnabled(!running);
  stop_action_->setEnabled(running);
  if (running)
    flags_timer_.start();
  else
    flags_timer_.stop();
}

void MainWindow::appendLog(const QString& line) {
  log_->appendPlainText(line);
}

void MainWindow::checkHosts() {
  const QString hosts = editor_->hosts();
  if (hosts.isEmpty()) {
    statusBar()->showMessage(
        tr("Cannot check: name the hosts in the Launch section's Hosts field (mpirun mode)"));
    return;
  }
  const QString shardlab = find_shardlab();
  if (shardlab.isEmpty()) {
    statusBar()->showMessage(
        tr("Cannot check: the shardlab command is not next to the app or on "
           "PATH"));
    return;
  }
  if (!cluster_check_) cluster_check_ = new ClusterCheckDialog(this);
  cluster_check_->run(shardlab, hosts);
  cluster_check_->show();
  cluster_check_->raise();
}

bool MainWindow::startRun() {
  if (run_->running()) {
    statusBar()->showMessage(tr("A run is already going"));
    return false;
  }
  if (!editor_->validateNow()) {
    statusBar()->showMessage(tr("Cannot start: %1").arg(editor_->problem()));
    return false;
  }
  LaunchOptions options;
  options.mode = mode_of(editor_->launchChoice());
  options.listen = editor_->listenAddress();
  options.hosts = editor_->hosts();
  if (!run_->start(editor_->job(), options)) {
    const QString why = tr("Cannot start: %1").arg(run_->lastError());
    statusBar()->showMessage(why);
    appendLog(why);
    return false;
  }
  teaching_->setGate(run_->teaching());
  if (replaying_) {
    replay_->pause();
    replaying_ = false;
    replay_bar_->hide();
  }
  showJob();  // the live run's topology and plan (a replay may have replaced them)
  connected_ = 0;
  log_->clear();
  memory_->setMeasured(run_->model());
  showRun(run_->model(), telemetry::now_seconds(), true);  // empty: the previous run's figures go
  setRunning(true);
  if (options.mode == LaunchMode::remote) {
    remote_mpirun_->setText(run_->remoteCommand(false));
    remote_srun_->setText(run_->remoteCommand(true));
    remote_box_->show();
    views_->setCurrentIndex(kLog);
    statusBar()->showMessage(
        tr("Listening on port %1: run the command in the Log tab on the cluster")
            .arg(run_->port()));
  } else {
    remote_box_->hide();
    remote_mpirun_->clear();
    remote_srun_->clear();
    statusBar()->showMessage(tr("Running…"));
  }
  appendLog(tr("Started %1").arg(editor_->summary()));
  return true;
}

void MainWindow::stopRun() {
  if (!run_->running()) return;
  statusBar()->showMessage(tr("Stopping…"));
  run_->stop();
}

void MainWindow::showJob() {
  try {
    const JobSpec& job = editor_->job();
    grid_->setTopology(launch::job_topology(job));
    memory_->setJob(job);
  } catch (const std::exception& e) {
    // The editor said valid; a view that cannot show it says why instead of going stale.
    statusBar()->showMessage(tr("Cannot show the job: %1").arg(QString::fromUtf8(e.what())));
  }
}

void MainWindow::showRun(const net::RunModel& run, double now, bool all) {
  const int tab = views_->currentIndex();
  if (all || tab == kOverview) {
    loss_->update(run);
    memory_->setMeasured(run);
  }
  if (all || tab == kCommunication) {
    heat_->update(run);
    table_->update(run);
  }
  if (all || tab == kTimeline) timeline_->update(run);
  if (all || tab == kHoldings) {
    holdings_->update(run);
    scrubber_->update(run);
  }
  markRanks(run, now);
}

void MainWindow::markRanks(const net::RunModel& run, double now) {
  const net::Diagnosis& d = run.diagnosis();
  QStringList lines;
  for (const std::string& line : run.diagnosis_lines()) lines << QString::fromStdString(line);
  diagnosis_->setText(lines.join(QStringLiteral("; ")));
  diagnosis_->setToolTip(lines.join(QLatin1Char('\n')));
  diagnosis_->setVisible(!lines.isEmpty());
  if (!grid_->hasTopology()) return;
  // The straggler's cell carries the whole diagnosis (its own line as the flag's reason); the
  // bottleneck stage's cells carry the bottleneck's line, an uneven layout's costliest stage's
  // cells the uneven line (never both: one names a slow stage, the other a costly layout).
  const int stage = d.bottleneck ? d.bottleneck->stage : d.uneven ? d.uneven->stage : -1;
  const QString note = QString::fromStdString(d.bottleneck ? d.bottleneck->text
                                              : d.uneven   ? d.uneven->text
                                                           : std::string());
  const int straggler = d.straggler ? d.straggler->rank : -1;
  for (int r = 0; r < grid_->world(); ++r) {
    const bool in_stage = stage >= 0 && grid_->topology().coord(r).pp == stage;
    grid_->setRankNote(r, in_stage || r == straggler ? note : QString());
  }
  for (int r = 0; r < grid_->world(); ++r) {
    const auto it = run.ranks().find(r);
    if (it == run.ranks().end()) {
      grid_->setRankFlag(r, RankGrid::Flag::None);
      continue;
    }
    const net::RankState& s = it->second;
    grid_->setRankHost(r, QString::fromStdString(run.host_of(r)));
    if (s.state == telemetry::JobState::failed) {
      grid_->setRankFlag(r, RankGrid::Flag::Failed, QString::fromStdString(run.failure_reason(r)));
    } else if (run.silent(r, now)) {
      grid_->setRankFlag(r, RankGrid::Flag::Silent,
                         tr("nothing heard for %1 s").arg(now - s.last_heartbeat, 0, 'f', 1));
    } else if (run.straggler(r)) {
      grid_->setRankFlag(r, RankGrid::Flag::Straggler, QString::fromStdString(d.straggler->text));
    } else {
      grid_->setRankFlag(r, RankGrid::Flag::None);
    }
  }
  showShares(run);
  grid_->setFigures(run);
  const net::CommStats& comm = run.comm();
  const bool talking = !comm.last_group().empty() && now - comm.last_end() < kCommunicatingSeconds;
  grid_->setCommunicating(talking ? comm.last_group() : std::string());
}

void MainWindow::showShares(const net::RunModel& run) {
  const int n = grid_->world();
  std::vector<double> shares(static_cast<size_t>(n), std::numeric_limits<double>::quiet_NaN());
  int64_t steps = 0;
  bool any = false;
  for (int r = 0; r < n; ++r) {
    const net::StepAccount w = run.time().window(r);
    if (w.steps == 0 || w.seconds <= 0) continue;
    // Collectives whose waits the backend cannot measure (nccl, old recordings) would read as
    // "never waits": no figure instead.
    if (shade_ == GridShade::wait && w.wait == 0 && w.transfer == 0 && w.unknown > 0) continue;
    shares[static_cast<size_t>(r)] = w.share(shade_ == GridShade::wait ? w.wait : w.compute);
    steps = std::max(steps, w.steps);
    any = true;
  }
  if (!any) {
    grid_->setShares({});
    return;
  }
  grid_->setShares(shares, shade_ == GridShade::wait ? tr("wait") : tr("compute"),
                   tr("of step time, last %1 steps").arg(steps));
}

bool MainWindow::openFile(const QString& path) {
  const auto refuse = [&](const QString& why) {
    problem_ = tr("cannot open %1: %2").arg(path, why);
    statusBar()->showMessage(problem_);
    return false;
  };
  // Only a regular file of at most kMaxJobFileBytes (the CLI's limit) is read: opening a FIFO
  // waits for a writer, a device such as /dev/zero never ends, and a huge file picked by mistake
  // would take the app's memory. Checked before opening, and the read is bounded as well (the
  // file may grow in between).
  constexpr auto kMax = static_cast<qint64>(kMaxJobFileBytes);
  const QString too_large = tr("larger than %1 MiB, not a job file").arg(kMax >> 20);
  const QFileInfo info(path);
  if (info.isDir()) return refuse(tr("is a directory"));
  if (info.exists() && !info.isFile())
    return refuse(tr("not a regular file (a device, FIFO or socket)"));
  if (info.size() > kMax) return refuse(too_large);
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly | QIODevice::Text)) return refuse(f.errorString());
  const QByteArray text = f.read(kMax + 1);
  if (text.size() > kMax) return refuse(too_large);
  if (f.error() != QFileDevice::NoError) return refuse(f.errorString());
  editor_->setText(QString::fromUtf8(text));
  file_ = path;
  setWindowTitle(tr("ShardLab — %1").arg(path));
  statusBar()->showMessage(tr("Opened %1").arg(path));
  return true;
}

bool MainWindow::saveFile(const QString& path) {
  QString error;
  if (!saveText(path, editor_->text(), &error)) {
    statusBar()->showMessage(tr("Cannot save: %1").arg(error));
    return false;
  }
  file_ = path;
  setWindowTitle(tr("ShardLab — %1").arg(path));
  statusBar()->showMessage(tr("Saved %1").arg(path));
  return true;
}

bool MainWindow::openRecording(const QString& path) {
  if (run_->running()) {
    statusBar()->showMessage(tr("Stop the run before opening a recording"));
    return false;
  }
  if (!replay_->open(path)) {
    problem_ = tr("cannot open the recording: %1").arg(replay_->lastError());
    statusBar()->showMessage(problem_);
    appendLog(replay_->lastError());
    return false;
  }
  replaying_ = true;
  // The topology comes from the workers' HELLOs (a recording holds no job file).
  replay_->seek(replay_->endTime());
  for (const auto& [rank, state] : replay_->model().ranks()) {
    if (!state.hello) continue;
    const net::Hello& h = *state.hello;
    try {
      grid_->setTopology(Topology::make({h.pp, h.tp, h.dp}, h.world));
    } catch (const std::exception& e) {
      appendLog(tr("The recording's topology cannot be drawn: %1").arg(e.what()));
    }
    break;
  }
  memory_->setMeasured(replay_->model());
  showRun(replay_->model(), replay_->position(), true);
  replay_bar_->show();
  play_->setText(tr("Play"));
  updateReplayBar();
  setWindowTitle(tr("ShardLab — replay of %1").arg(path));
  QString message = tr("Replaying %1 (%2 messages)").arg(path).arg(replay_->messageCount());
  if (!replay_->note().isEmpty()) message += QStringLiteral("; ") + replay_->note();
  statusBar()->showMessage(message);
  appendLog(message);
  return true;
}

void MainWindow::updateReplayBar() {
  const double span = replay_->endTime() - replay_->startTime();
  const double at = replay_->position() - replay_->startTime();
  if (!scrub_->isSliderDown()) {
    const QSignalBlocker quiet(scrub_);  // showing the position is not a seek
    scrub_->setValue(span > 0 ? static_cast<int>(at / span * kScrubSteps) : 0);
  }
  replay_label_->setText(tr("%1 / %2 s").arg(at, 0, 'f', 1).arg(span, 0, 'f', 1));
}

void MainWindow::exportPng() {
  const QString p = QFileDialog::getSaveFileName(this, tr("Export view as PNG"),
                                                 views_->tabText(views_->currentIndex()) + ".png",
                                                 tr("PNG images (*.png)"));
  if (p.isEmpty()) return;
  QString error;
  if (!savePng(views_->currentWidget(), p, &error))
    statusBar()->showMessage(error);
  else
    statusBar()->showMessage(tr("Saved %1").arg(p));
}

void MainWindow::exportCsv(const QString& what, const QString& text) {
  const QString p = QFileDialog::getSaveFileName(this, tr("Export %1 as CSV").arg(what),
                                                 what + ".csv", tr("CSV files (*.csv)"));
  if (p.isEmpty()) return;
  QString error;
  if (!saveText(p, text, &error))
    statusBar()->showMessage(error);
  else
    statusBar()->showMessage(tr("Saved %1").arg(p));
}

bool MainWindow::saveScreenshots(const QString& dir, QString* error) {
  if (!QDir().mkpath(dir)) {
    *error = tr("cannot create %1").arg(dir);
    return false;
  }
  static const char* const kNames[] = {"overview", "communication", "timeline", "log"};
  const int current = views_->currentIndex();
  for (int i = 0; i < views_->count() && i < 4; ++i) {
    views_->setCurrentIndex(i);
    QApplication::processEvents();
    if (!savePng(this, QDir(dir).filePath(QString::fromLatin1(kNames[i]) + ".png"), error))
      return false;
  }
  // Who holds what (the README's teaching pictures come from the toy job's runs).
  views_->setCurrentIndex(kHoldings);
  QApplication::processEvents();
  if (!savePng(this, QDir(dir).filePath("holdings.png"), error)) return false;
  views_->setCurrentIndex(current);
  return true;
}

}  // namespace shardlab::gui
