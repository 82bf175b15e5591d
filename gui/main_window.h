// MainWindow: the app's frame.
//
//   +-- toolbar: Open / Save | Start / Stop | Open recording | Export ------------------------+
//   | job editor           | Overview:      rank grid | per-rank memory (planned, measured)  |
//   | (Form / JSON tabs,   |                loss and evaluation against step                 |
//   |  the engine's        | Communication: rank x step heat map, per collective/group table |
//   |  validation beside   | Timeline:      a lane per rank over the last steps              |
//   |  every field)        | Log:           output, failures, the remote-worker command      |
//   |                      | Plan:          a large job's layouts, ranked (gui/plan_view.h)  |
//   |                      | Who holds what: each rank's slices of params, grads, optimizer  |
//   |                      |                state over the model (gui/holdings_view.h), under |
//   |                      |                one step replayed frame by frame (step_scrubber.h) |
//   |                      | [replay bar: play/pause, position slider] (recordings only)     |
//   +------------------------------------------------------------------------------------------+
//
// The grid and the memory plan follow the edited job whenever it is valid. Run > Start launches
// the job the way the editor's Launch section says (threads in this process, local processes
// through mpirun, or remote workers connecting to the app; RunController); every view then
// redraws from the run's net::RunModel as events arrive (at most every 100 ms), and the grid
// marks the group communicating now, stragglers, silent and failed ranks (with the reason in the
// tooltip). File > Open recording replays a .slrec into the same views (ReplayController). Saving
// never leaves a half-written file (QSaveFile).
//
// Where the time goes: the grid colours each rank by its wait share (or, switched in its header,
// its compute share) over its last steps (RunModel::time()), the heat map shows wait, transfer,
// compute or all communication per rank and step (a switch in its header; wait by default), and
// the run model's diagnosis (the straggler the others wait for, the bottleneck pipeline stage) is
// the status bar's permanent text and part of the tooltips of the ranks it names.
#pragma once

#include <QMainWindow>
#include <QTimer>

#include "gui/comm_heat_map.h"
#include "gui/comm_table.h"
#include "gui/holdings_view.h"
#include "gui/job_editor.h"
#include "gui/loss_chart.h"
#include "gui/memory_view.h"
#include "gui/plan_view.h"
#include "gui/rank_grid.h"
#include "gui/replay_controller.h"
#include "gui/run_controller.h"
#include "gui/step_scrubber.h"
#include "gui/teaching_bar.h"
#include "gui/timeline_view.h"

QT_BEGIN_NAMESPACE
class QAction;
class QComboBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QPushButton;
class QSlider;
class QTabWidget;
QT_END_NAMESPACE

namespace shardlab::gui {

class ClusterCheckDialog;

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  // The views' tabs, in order.
  enum Tab { kOverview = 0, kCommunication, kTimeline, kLog, kPlan, kHoldings };
  // What colours the grid's cells during a run.
  enum class GridShade { wait = 0, compute };

  explicit MainWindow(QWidget* parent = nullptr);

  JobEditor* editor() const { return editor_; }
  TeachingBar* teachingBar() const { return teaching_; }
  RankGrid* rankGrid() const { return grid_; }
  MemoryView* memoryView() const { return memory_; }
  LossChart* lossChart() const { return loss_; }
  CommHeatMap* heatMap() const { return heat_; }
  CommTable* commTable() const { return table_; }
  TimelineView* timeline() const { return timeline_; }
  PlanView* planView() const { return plan_; }
  HoldingsView* holdingsView() const { return holdings_; }
  StepScrubber* stepScrubber() const { return scrubber_; }
  RunController* runController() const { return run_; }
  ReplayController* replayController() const { return replay_; }
  QTabWidget* views() const { return views_; }
  QString logText() const;
  // The diagnosis shown in the status bar: RunModel::diagnosis().lines() joined by "; " (empty
  // when it says nothing; an uneven layout's line names nobody but is shown).
  QString diagnosisText() const;
  // The switches in the grid's and the heat map's headers (they redraw at once).
  void setGridShade(GridShade shade);
  GridShade gridShade() const { return shade_; }
  void setHeatMetric(net::StepMetric metric);
  // The commands shown for remote workers (mpirun, srun); empty unless a remote run is going.
  QString remoteMpirunCommand() const;
  QString remoteSrunCommand() const;

  // Run > Start: launches the edited job (see the file comment); false, with the reason in the
  // status bar and the log, when it is invalid or refused.
  bool startRun();
  // Run > Stop.
  void stopRun();
  // Run > Check the hosts: `shardlab doctor --hosts` on the Hosts field's hosts, its pair matrix
  // as a heat map (gui/cluster_check.h); says in the status bar why when it cannot start.
  void checkHosts();
  // Return false and show why (status bar) when the file cannot be read or written.
  bool openFile(const QString& path);
  bool saveFile(const QString& path);
  QString currentFile() const { return file_; }
  // Why the last openFile() or openRecording() failed.
  QString lastProblem() const { return problem_; }
  // Opens a recording for replay (refused while a run is going); false and the reason shown when
  // it cannot be read.
  bool openRecording(const QString& path);
  bool replaying() const { return replaying_; }
  // A PNG of the whole window for every tab (overview.png, communication.png, timeline.png,
  // log.png) into `dir` (created when missing); false with the reason otherwise.
  bool saveScreenshots(const QString& dir, QString* error);

 private:
  void buildViews();
  void buildMenus();
  // The edited job changed and is valid: redraw the grid and the memory plan.
  void showJob();
  // Redraw from `run` (the live run's model or the replay's): the grid's flags and the views of
  // the visible tab, or every view when `all` (a tab change, a run's end, a new recording); `now`
  // judges silence.
  void showRun(const net::RunModel& run, double now, bool all);
  void markRanks(const net::RunModel& run, double now);
  void showShares(const net::RunModel& run);
  // The model the views show: the replay's or the live run's.
  const net::RunModel& shownModel() const;
  void appendLog(const QString& line);
  void setRunning(bool running);
  void updateReplayBar();
  void exportPng();
  void exportCsv(const QString& what, const QString& text);

  JobEditor* editor_;
  QTabWidget* views_;
  RankGrid* grid_;
  MemoryView* memory_;
  LossChart* loss_;
  CommHeatMap* heat_;
  QComboBox* heat_metric_;
  QComboBox* grid_shade_;
  QLabel* diagnosis_;
  TeachingBar* teaching_;
  GridShade shade_ = GridShade::wait;
  CommTable* table_;
  TimelineView* timeline_;
  PlanView* plan_;
  HoldingsView* holdings_;
  StepScrubber* scrubber_;  // one step, phase by phase, above the strips
  QPlainTextEdit* log_;
  QWidget* remote_box_;
  QLineEdit* remote_mpirun_;
  QLineEdit* remote_srun_;
  QWidget* replay_bar_;
  QPushButton* play_;
  QSlider* scrub_;
  QLabel* replay_label_;
  QAction* start_action_;
  QAction* stop_action_;
  RunController* run_;
  ClusterCheckDialog* cluster_check_ = nullptr;  // made on first use
  ReplayController* replay_;
  QString file_;
  QString problem_;
  QTimer flags_timer_;  // re-judges silent ranks while a run goes
  bool replaying_ = false;
  int connected_ = 0;
};

}  // namespace shardlab::gui
