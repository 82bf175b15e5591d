// PlanView: the app's Plan tab, a what-if for a large GPT job before anything runs (engine/plan).
//
//   +-- Model:   [preset | custom] layers hidden heads ffn seq vocab ---------------------------+
//   |   Job:     GPU, GPUs, GPUs per node, global batch, plans shown                           |
//   |   Layout:  tp pp dp zero recompute micro-batch interleave ("search" or fixed)            |
//   |   Options: sequence parallelism on, fp32 gradients, no dp overlap              [Plan]    |
//   | the planner's message (bad input), or the job in one line (parameters, layouts searched)  |
//   | ranked layouts: # pp tp dp micro-batch interleave zero recompute sp GiB step TFLOP/s MFU  |
//   | memory per GPU on each pipeline stage,  | the step's time split (one stacked bar)         |
//   | stacked by category, lines at the       | MFU and TFLOP/s, why this layout, what the      |
//   | usable memory and the GPU's HBM         | estimate leaves out                             |
//   +-------------------------------------------------------------------------------------------+
//
// The form is read by plan::read_plan_inputs (the one reader of a plan's fields for every front
// end) through a getter over its fields, named as in plan_inputs.h with no prefix: a field left
// at "search" (or a preset's "4 × hidden" ffn, the GPU's own GPUs per node, an unticked switch)
// is absent. Every check and every list (presets, GPUs) is the engine's; bad input shows the
// planner's message on the tab and leaves the table empty. Choosing a preset fills the model's
// spin boxes; editing one of them makes the model "custom".
//
// The selected row (the best by default) is drawn: its memory per stage in the memory view's
// category colours (MemoryView::categoryColor), its time split in the timeline's colours
// (TimelineView: compute as a forward, communication as collectives, the bubble as idle time,
// the optimizer as the optimizer). With many stages the stage axis labels every Nth stage.
#pragma once

#include <QColor>
#include <QString>
#include <QWidget>

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "engine/plan/layout_as_job.h"
#include "engine/plan/plan_inputs.h"

QT_BEGIN_NAMESPACE
class QBarCategoryAxis;
class QCategoryAxis;
class QChart;
class QChartView;
class QComboBox;
class QHorizontalStackedBarSeries;
class QLabel;
class QLineSeries;
class QPushButton;
class QStackedBarSeries;
class QTableWidget;
class QValueAxis;
QT_END_NAMESPACE

namespace shardlab::gui {

class PlanView : public QWidget {
  Q_OBJECT
 public:
  // The table's columns.
  enum Column {
    kRank = 0,
    kPp,
    kTp,
    kDp,
    kMicroBatch,
    kInterleave,
    kZero,
    kRecompute,
    kSp,
    kGib,
    kStep,
    kTflops,
    kMfu,
    kFits,
    kColumns
  };
  // The stage axis labels at most this many stages: every Nth, N a power of two for a power of
  // two stages, else 1, 2, 5, 10, 20, ...
  static constexpr int kMaxStageLabels = 16;

  explicit PlanView(QWidget* parent = nullptr);

  // A form field as the planner reads it (plan_inputs.h's names): nullopt when absent ("search").
  std::optional<std::string> field(std::string_view name) const;
  // Sets a field as a person would: "model" a preset name or "custom", "gpu" a GPU name,
  // "recompute" and the numbers "search" or a value, a switch "1" or "0". False for an unknown
  // field or a value the field cannot show.
  bool setField(const QString& name, const QString& value);

  // The Plan button: reads the form, searches, fills the table and shows its first row. False,
  // with the planner's message shown and the table and charts empty, when the form is no job.
  bool plan();
  // Draws row `row` of the table (a plan of result()).
  void showPlan(int row);

  // The last answer (empty plans after bad input) and the inputs it was planned for.
  const plan::PlanResult& result() const { return result_; }
  const std::optional<plan::PlanInputs>& inputs() const { return inputs_; }
  int shownPlan() const { return shown_; }
  // The planner's message for the form, empty after a good plan.
  QString message() const;
  QString summaryText() const;
  QString mfuText() const;
  QString whyText() const;
  QString leftOutText() const;

  // The shown plan's layout as a job this machine runs (engine/plan/layout_as_job.h); nullopt
  // with no plan shown.
  std::optional<plan::LayoutAsJob> shownAsJob() const;

  QTableWidget* table() const { return table_; }
  QPushButton* planButton() const { return plan_button_; }
  QPushButton* openJobButton() const { return open_job_button_; }
  QChart* memoryChart() const { return memory_chart_; }
  QStackedBarSeries* memorySeries() const { return memory_series_; }
  QCategoryAxis* stageAxis() const { return stage_axis_; }
  QLineSeries* usableLine() const { return usable_line_; }
  // The limit lines' colours: engine/telemetry/palette.h's, as on the web page's /plan.
  static QColor usableLineColor();
  static QColor hbmLineColor();
  QLineSeries* hbmLine() const { return hbm_line_; }
  QHorizontalStackedBarSeries* timeSeries() const { return time_series_; }

  // N: every Nth stage of `stages` is labelled (1 up to kMaxStageLabels stages).
  static int stageLabelStep(int stages);

 signals:
  // After every press of Plan; `ok` false when the planner refused the form.
  void planned(bool ok);
  // "Open as job": the shown plan's job (job_to_json, indented) and what was scaled or left out.
  void openJob(const QString& job_json, const QString& changes);

 private:
  QWidget* buildForm();
  QWidget* buildCharts();
  // The preset's sizes into the spin boxes (signals blocked).
  void fillPreset(int index);
  // A model spin box was edited: "custom" unless the values are still the preset's.
  void modelEdited();
  void clearAnswer();
  void fillTable();
  void drawMemory(const plan::Estimate& e);
  void drawTime(const plan::Estimate& e);

  std::map<std::string, QWidget*, std::less<>> fields_;  // by plan_inputs.h's name
  QComboBox* model_;
  QPushButton* plan_button_;
  QPushButton* open_job_button_;
  QLabel* message_;
  QLabel* summary_;
  QTableWidget* table_;
  QChart* memory_chart_;
  QChartView* memory_view_;
  QStackedBarSeries* memory_series_;
  QCategoryAxis* stage_axis_;
  QValueAxis* gib_axis_;
  QLineSeries* usable_line_;
  QLineSeries* hbm_line_;
  QChart* time_chart_;
  QHorizontalStackedBarSeries* time_series_;
  QBarCategoryAxis* step_axis_;
  QValueAxis* seconds_axis_;
  QLabel* mfu_;
  QLabel* why_;
  QLabel* left_out_;

  std::optional<plan::PlanInputs> inputs_;
  plan::PlanResult result_;
  int shown_ = -1;
};

}  // namespace shardlab::gui
