// MemoryView: per-rank memory as stacked bars by category, the planner's prediction beside what
// the ranks measured.
//
// MemoryViewModel (no widgets, testable) holds the figures:
//   - predicted: the engine's planner (engine/plan/memory/planner.h), steady-state bytes per rank
//   by
//     category, recomputed by setJob() as the user edits. Strategy "none" plans one rank
//     (plan_memory with world 1); ddp/zero1/zero2/fsdp plan every rank alike (plan_memory over
//     model_layout(job.model)); a job with tensor or pipeline parallelism plans each rank with
//     plan_memory_hybrid, computed once per (pp, tp) coordinate (ranks differing only in dp hold
//     the same). The planner predicts params, grads and optimizer state only: activations and
//     comm are predicted as 0.
//   - measured: the current bytes by category each rank last reported (net::RunModel).
// An invalid job (validate() finds a problem, or the planner throws) keeps no prediction and
// exposes the first problem as error(). A GPT job whose model.gpt.vocab_size is 0 (taken from the
// corpus when the job runs) is planned with kPlaceholderVocab symbols, and note() says so.
//
// MemoryView draws the model into a QChartView: for each of the first kMaxDrawnRanks ranks two
// stacked bars side by side, "planned" and "measured", with one QBarSet per category (params,
// grads, optimizer_state, activations). Every update rebuilds the sets whole (never per-point
// appends); a label says "first 64 of N ranks" when the job is larger.
//
// Model states only: activations often dwarf the model states (the 2x2x2 gpt-3d run measures
// ~9.6 MiB of activations against ~0.3 MiB of parameters, gradients and optimizer state per
// rank), leaving those slivers at the bottom. The "Model states only" checkbox drops the
// activations set and scales the axis to params + grads + optimizer_state alone (the planned bars
// are model states too, so they stay on the same axis). Until the user clicks it, it follows a
// rule: on when the tallest model-states stack is under kModelStatesShare of the tallest whole
// bar; once clicked (or set through setModelStatesOnly) the user's choice stays.
//
// Labels: QtCharts elides category labels ("...") and legend entries ("optimizer_st...") when
// space is short, so the view draws its own. Under the plot, one row of "P" / "M" letters under
// the planned and measured bars when each bar is wide enough for a letter, then the rank numbers
// centred under each pair: every rank when they fit, else every k-th (k a power of two, the
// smallest whose labels leave a gap between neighbours), then the caption. The legend is a
// word-wrapped label under the chart that breaks only between entries: never truncated.
#pragma once

#include <QColor>
#include <QLabel>
#include <QList>
#include <QRectF>
#include <QString>
#include <QStringList>
#include <QWidget>

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "engine/core/memory.h"

QT_BEGIN_NAMESPACE
class QBarCategoryAxis;
class QChart;
class QChartView;
class QCheckBox;
class QGraphicsSimpleTextItem;
class QStackedBarSeries;
class QValueAxis;
QT_END_NAMESPACE

namespace shardlab {
struct JobSpec;
namespace net {
class RunModel;
}
}  // namespace shardlab

namespace shardlab::gui {

class MemoryViewModel {
 public:
  // Symbols assumed for a GPT job whose vocab_size is 0 (unknown until the corpus is read):
  // printable ASCII, about what a character corpus holds.
  static constexpr int64_t kPlaceholderVocab = 96;

  // Recomputes the prediction for `job` (see the file comment). Measured figures are kept.
  void setJob(const JobSpec& job);
  // Takes every rank's current bytes by category from `run` (replacing earlier measurements).
  void setMeasured(const net::RunModel& run);
  void clearMeasured() { measured_.clear(); }

  bool hasPrediction() const { return !predicted_.empty(); }
  // Ranks to show: the job's world size when predicted, at least one past the highest measured.
  int ranks() const;
  // Predicted steady bytes of `rank` under `category`; 0 without a prediction, for a rank out of
  // range, and for activations and comm (the planner does not predict them).
  int64_t predicted(int rank, MemCategory category) const;
  // Measured current bytes; nullopt when the rank has reported no memory.
  std::optional<int64_t> measured(int rank, MemCategory category) const;
  // The first problem with the job ("parallel.tp: ..."), empty when there is a prediction.
  QString error() const { return error_; }
  // An assumption behind the prediction (the placeholder vocabulary), empty when none.
  QString note() const { return note_; }
  // The planner's formula for rank 0, e.g. "zero2: 4*Psi' + 4*Psi'/N + 8*Psi'/N".
  QString formula() const { return formula_; }

 private:
  std::vector<MemoryFigures> predicted_;   // one per rank; empty: no prediction
  std::map<int, MemoryFigures> measured_;  // rank -> current bytes
  QString error_;
  QString note_;
  QString formula_;
};

class MemoryView : public QWidget {
  Q_OBJECT
 public:
  static constexpr int kMaxDrawnRanks = 64;
  // The categories drawn, bottom to top.
  static constexpr std::array<MemCategory, 4> kDrawnCategories{
      MemCategory::params, MemCategory::grads, MemCategory::optimizer_state,
      MemCategory::activations};
  // The model states: what "Model states only" keeps.
  static constexpr std::array<MemCategory, 3> kModelStates{MemCategory::params, MemCategory::grads,
                                                           MemCategory::optimizer_state};
  // Until the user chooses, "Model states only" is on when the tallest model-states stack is
  // below this share of the tallest whole bar.
  static constexpr double kModelStatesShare = 0.10;

  // A label drawn under the plot: its text and where it is (scene coordinates).
  struct Label {
    QString text;
    QRectF rect;
  };

  explicit MemoryView(QWidget* parent = nullptr);

  // The colour of each category, here and wherever the app draws memory by category (the Plan
  // tab's stages, gui/plan_view.h): engine/telemetry/palette.h's, as on the web page.
  static QColor categoryColor(MemCategory category);

  const MemoryViewModel& model() const { return model_; }
  // Update the model and redraw.
  void setJob(const JobSpec& job);
  void setMeasured(const net::RunModel& run);
  // Redraws from the model: replaces every bar set of the series at once.
  void rebuild();

  QStackedBarSeries* series() const { return series_; }
  QChartView* chartView() const { return view_; }
  QValueAxis* valueAxis() const { return axis_y_; }
  // "first 64 of N ranks", the job's problem or the planner's note.
  QString statusText() const { return status_->text(); }

  // Whether only the model states are drawn now (see the file comment).
  bool modelStatesOnly() const { return states_only_; }
  // The user's choice: it stays, whatever the figures (the checkbox's click does the same).
  void setModelStatesOnly(bool on);
  // Whether the user has chosen (false: the rule decides).
  bool modelStatesChosen() const { return user_chose_; }
  QCheckBox* modelStatesBox() const { return states_box_; }

  // The labels under the plot as drawn (after the last layout of the chart): P/M letters, rank
  // numbers and the caption, in drawing order.
  QList<Label> labels() const;
  // The legend's entries, as shown: one per drawn category.
  QStringList legendEntries() const { return legend_entries_; }
  QLabel* legend() const { return legend_; }

 private:
  void showTip(bool hovering, int index, MemCategory category);
  // Lays the labels out under the plot area (on every rebuild and plot-area change).
  void placeLabels();

  MemoryViewModel model_;
  QChart* chart_;
  QChartView* view_;
  QStackedBarSeries* series_;
  QBarCategoryAxis* axis_x_;
  QValueAxis* axis_y_;
  QLabel* status_;
  QLabel* legend_;
  QCheckBox* states_box_;
  QStringList legend_entries_;
  QList<QGraphicsSimpleTextItem*> label_items_;  // children of the chart
  int drawn_ = 0;                                // ranks drawn by the last rebuild
  bool states_only_ = false;
  bool user_chose_ = false;
  double unit_ = 1;  // bytes per axis unit
  QString unit_name_ = "B";
};

}  // namespace shardlab::gui
