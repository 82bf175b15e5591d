#include "gui/loss_chart.h"

#include <QChart>
#include <QChartView>
#include <QLineSeries>
#include <QList>
#include <QPointF>
#include <QVBoxLayout>
#include <QValueAxis>

#include <algorithm>
#include <cmath>

#include "net/run_model.h"

namespace shardlab::gui {

LossChart::LossChart(QWidget* parent) : QWidget(parent) {
  chart_ = new QChart;
  chart_->setTitle(tr("Loss (rank 0)"));
  chart_->legend()->hide();
  series_ = new QLineSeries;
  chart_->addSeries(series_);
  axis_x_ = new QValueAxis;
  axis_x_->setTitleText(tr("step"));
  axis_x_->setLabelFormat("%d");
  axis_y_ = new QValueAxis;
  axis_y_->setTitleText(tr("loss"));
  chart_->addAxis(axis_x_, Qt::AlignBottom);
  chart_->addAxis(axis_y_, Qt::AlignLeft);
  series_->attachAxis(axis_x_);
  series_->attachAxis(axis_y_);
  axis_x_->setRange(0, 1);
  axis_y_->setRange(0, 1);
  view_ = new QChartView(chart_, this);
  view_->setRenderHint(QPainter::Antialiasing);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(view_);
}

void LossChart::update(const net::RunModel& run) {
  QList<QPointF> points;
  const auto it = run.ranks().find(0);
  if (it != run.ranks().end()) {
    const std::vector<double>& loss = it->second.loss_series;
    points.reserve(static_cast<qsizetype>(loss.size()));
    for (size_t i = 0; i < loss.size(); ++i)
      points.append(QPointF(static_cast<double>(i + 1), loss[i]));
  }
  series_->replace(points);
  if (points.isEmpty()) {
    axis_x_->setRange(0, 1);
    axis_y_->setRange(0, 1);
    return;
  }
  double lo = points.front().y(), hi = lo;
  for (const QPointF& p : points) {
    lo = std::min(lo, p.y());
    hi = std::max(hi, p.y());
  }
  const double pad = hi > lo ? 0.05 * (hi - lo) : std::max(0.05 * std::abs(hi), 0.5);
  axis_x_->setRange(1, std::max<double>(2, static_cast<double>(points.size())));
  axis_y_->setRange(lo - pad, hi + pad);
}

}  // namespace shardlab::gui
