// LossChart: rank 0's training loss against the step, drawn live from a net::RunModel,
// with rank 0's evaluations (RankState::evals) on the same chart: the eval loss as points on the
// loss axes, the eval accuracy as points joined by a line on a second (right) axis from 0 to 1.
// Every update() replaces each whole series at once (QXYSeries::replace, never per-point appends)
// and rescales the step and loss axes to the data.
#pragma once

#include <QString>
#include <QWidget>

QT_BEGIN_NAMESPACE
class QChart;
class QChartView;
class QLineSeries;
class QScatterSeries;
class QValueAxis;
QT_END_NAMESPACE

namespace shardlab::net {
class RunModel;
}

namespace shardlab::gui {

class LossChart : public QWidget {
  Q_OBJECT
 public:
  explicit LossChart(QWidget* parent = nullptr);

  using QWidget::update;  // repaint, still reachable beside the model overload

  // Redraws from rank 0's loss series (step i * series_stride + 1 -> loss_series[i]) and
  // evaluations (step -> loss, step -> accuracy); empty series when rank 0 has none.
  void update(const net::RunModel& run);
  QLineSeries* series() const { return series_; }
  QScatterSeries* evalLossSeries() const { return eval_loss_; }
  QLineSeries* evalAccuracySeries() const { return eval_accuracy_; }
  QValueAxis* accuracyAxis() const { return axis_acc_; }
  QChartView* chartView() const { return view_; }

  // "step,loss,eval_loss,eval_accuracy": one row per step that has a training loss or an
  // evaluation, in step order; empty cells where a step has none.
  QString csv() const;

 private:
  QChart* chart_;
  QChartView* view_;
  QLineSeries* series_;
  QScatterSeries* eval_loss_;
  QLineSeries* eval_accuracy_;
  QValueAxis* axis_x_;
  QValueAxis* axis_y_;
  QValueAxis* axis_acc_;
};

}  // namespace shardlab::gui
