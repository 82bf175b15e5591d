#include "gui/loss_chart.h"

#include <QChart>
#include <QChartView>
#include <QLegend>
#include <QLineSeries>
#include <QList>
#include <QPointF>
#include <QScatterSeries>
#include <QVBoxLayout>
#include <QValueAxis>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "net/run_model.h"

namespace shardlab::gui {

LossChart::LossChart(QWidget* parent) : QWidget(parent) {
  chart_ = new QChart;
  chart_->setTitle(tr("Loss (rank 0)"));
  chart_->legend()->setAlignment(Qt::AlignBottom);
  series_ = new QLineSeries;
  series_->setName(tr("loss"));
  eval_loss_ = new QScatterSeries;
  eval_loss_->setName(tr("eval loss"));
  eval_loss_->setMarkerSize(8);
  eval_accuracy_ = new QLineSeries;
  eval_accuracy_->setName(tr("eval accuracy"));
  eval_accuracy_->setPointsVisible(true);
  chart_->addSeries(series_);
  chart_->addSeries(eval_loss_);
  chart_->addSeries(eval_accuracy_);
  axis_x_ = new QValueAxis;
  axis_x_->setTitleText(tr("step"));
  axis_x_->setLabelFormat("%d");
  axis_y_ = new QValueAxis;
  axis_y_->setTitleText(tr("loss"));
  axis_acc_ = new QValueAxis;
  axis_acc_->setTitleText(tr("eval accuracy"));
  axis_acc_->setLabelFormat("%.1f");
  axis_acc_->setRange(0, 1);
  chart_->addAxis(axis_x_, Qt::AlignBottom);
  chart_->addAxis(axis_y_, Qt::AlignLeft);
  chart_->addAxis(axis_acc_, Qt::AlignRight);
  series_->attachAxis(axis_x_);
  series_->attachAxis(axis_y_);
  eval_loss_->attachAxis(axis_x_);
  eval_loss_->attachAxis(axis_y_);
  eval_accuracy_->attachAxis(axis_x_);
  eval_accuracy_->attachAxis(axis_acc_);
  axis_x_->setRange(0, 1);
  axis_y_->setRange(0, 1);
  view_ = new QChartView(chart_, this);
  view_->setRenderHint(QPainter::Antialiasing);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(view_);
}

void LossChart::update(const net::RunModel& run) {
  QList<QPointF> points, eval_loss, eval_acc;
  const auto it = run.ranks().find(0);
  if (it != run.ranks().end()) {
    const std::vector<double>& loss = it->second.loss_series;
    points.reserve(static_cast<qsizetype>(loss.size()));
    const auto stride = static_cast<double>(it->second.series_stride);
    for (size_t i = 0; i < loss.size(); ++i)
      points.append(QPointF(static_cast<double>(i) * stride + 1, loss[i]));
    const std::vector<telemetry::EvalEvent>& evals = it->second.evals;
    eval_loss.reserve(static_cast<qsizetype>(evals.size()));
    eval_acc.reserve(static_cast<qsizetype>(evals.size()));
    for (const telemetry::EvalEvent& e : evals) {
      eval_loss.append(QPointF(static_cast<double>(e.step), e.loss));
      eval_acc.append(QPointF(static_cast<double>(e.step), e.accuracy));
    }
  }
  series_->replace(points);
  eval_loss_->replace(eval_loss);
  eval_accuracy_->replace(eval_acc);
  if (points.isEmpty() && eval_loss.isEmpty()) {
    axis_x_->setRange(0, 1);
    axis_y_->setRange(0, 1);
    return;
  }
  double lo = 0, hi = 0, first = 1, last = 2;
  bool any = false;
  for (const QList<QPointF>* list : {&points, &eval_loss}) {
    for (const QPointF& p : *list) {
      lo = any ? std::min(lo, p.y()) : p.y();
      hi = any ? std::max(hi, p.y()) : p.y();
      first = std::min(first, p.x());
      last = std::max(last, p.x());
      any = true;
    }
  }
  const double pad = hi > lo ? 0.05 * (hi - lo) : std::max(0.05 * std::abs(hi), 0.5);
  axis_x_->setRange(first, last);
  axis_y_->setRange(lo - pad, hi + pad);
}

QString LossChart::csv() const {
  struct Row {
    std::optional<double> loss, eval_loss, eval_accuracy;
  };
  std::map<long long, Row> rows;
  auto step = [](const QPointF& p) { return std::llround(p.x()); };
  for (const QPointF& p : series_->points()) rows[step(p)].loss = p.y();
  for (const QPointF& p : eval_loss_->points()) rows[step(p)].eval_loss = p.y();
  for (const QPointF& p : eval_accuracy_->points()) rows[step(p)].eval_accuracy = p.y();
  auto cell = [](const std::optional<double>& v) {
    return v ? QString::number(*v, 'g', 10) : QString();
  };
  QString out = QStringLiteral("step,loss,eval_loss,eval_accuracy\n");
  for (const auto& [s, r] : rows)
    out += QString::number(s) + ',' + cell(r.loss) + ',' + cell(r.eval_loss) + ',' +
           cell(r.eval_accuracy) + '\n';
  return out;
}

}  // namespace shardlab::gui
