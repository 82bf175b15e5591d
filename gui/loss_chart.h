// LossChart: rank 0's training loss against the step, drawn live from a net::RunModel (issue 7).
// Every update() replaces the whole series at once (QLineSeries::replace, never per-point appends)
// and rescales both axes to the data.
#pragma once

#include <QWidget>

QT_BEGIN_NAMESPACE
class QChart;
class QChartView;
class QLineSeries;
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

  // Redraws from rank 0's loss series (step i+1 -> loss_series[i]); empty when rank 0 has none.
  void update(const net::RunModel& run);
  QLineSeries* series() const { return series_; }
  QChartView* chartView() const { return view_; }

 private:
  QChart* chart_;
  QChartView* view_;
  QLineSeries* series_;
  QValueAxis* axis_x_;
  QValueAxis* axis_y_;
};

}  // namespace shardlab::gui
