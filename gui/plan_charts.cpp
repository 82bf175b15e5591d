// PlanView's charts: the selected plan's memory per pipeline stage and its step's time split.
#include <QBarCategoryAxis>
#include <QBarSet>
#include <QCategoryAxis>
#include <QChart>
#include <QChartView>
#include <QCursor>
#include <QHBoxLayout>
#include <QHorizontalStackedBarSeries>
#include <QLabel>
#include <QLegend>
#include <QLineSeries>
#include <QPen>
#include <QStackedBarSeries>
#include <QToolTip>
#include <QVBoxLayout>
#include <QValueAxis>

#include <algorithm>
#include <cmath>

#include "engine/core/memory.h"
#include "gui/memory_view.h"
#include "gui/palette_color.h"
#include "gui/plan_view.h"
#include "gui/timeline_view.h"

namespace shardlab::gui {

namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

// The categories drawn, bottom to top, with the breakdown's field for each.
constexpr std::pair<MemCategory, double plan::MemoryBreakdown::*> kMemory[] = {
    {MemCategory::params, &plan::MemoryBreakdown::params},
    {MemCategory::grads, &plan::MemoryBreakdown::grads},
    {MemCategory::optimizer_state, &plan::MemoryBreakdown::optimizer_state},
    {MemCategory::activations, &plan::MemoryBreakdown::activations},
    {MemCategory::comm, &plan::MemoryBreakdown::comm}};

// The parts of a step, left to right, in the timeline's colours: compute as a forward pass,
// the three kinds of communication as collectives (one shade each), the bubble as idle time.
struct TimePart {
  const char* name;
  double plan::TimeBreakdown::*seconds;
  QColor color;
};
std::vector<TimePart> time_parts() {
  const QColor collective = TimelineView::kindColor(net::SpanKind::collective);
  return {
      {"compute", &plan::TimeBreakdown::compute, TimelineView::kindColor(net::SpanKind::forward)},
      {"tp", &plan::TimeBreakdown::tp, collective.darker(130)},
      {"pp", &plan::TimeBreakdown::pp, collective},
      {"dp", &plan::TimeBreakdown::dp, collective.lighter(135)},
      {"bubble", &plan::TimeBreakdown::bubble, TimelineView::idleColor()},
      {"optimizer", &plan::TimeBreakdown::optimizer,
       TimelineView::kindColor(net::SpanKind::optimizer)}};
}

// 1, 2, 5, 10, 20, 50, ...: the factor to the next step after `tick`.
double tick_growth(double tick) {
  const double mantissa = tick / std::pow(10.0, std::floor(std::log10(tick) + 1e-9));
  return mantissa < 1.5 ? 2.0 : mantissa < 3 ? 2.5 : 2.0;
}

QString seconds(double s) {
  return QString::number(s, 'f', s < 0.1 ? 3 : 2);
}

QChartView* view_of(QChart* chart) {
  auto* view = new QChartView(chart);  // takes ownership of the chart
  view->setRenderHint(QPainter::Antialiasing, true);
  return view;
}

QLabel* text_label(const char* name) {
  auto* l = new QLabel;
  l->setObjectName(QString::fromLatin1(name));
  l->setTextFormat(Qt::PlainText);
  l->setWordWrap(true);
  l->setTextInteractionFlags(Qt::TextSelectableByMouse);
  l->setAlignment(Qt::AlignLeft | Qt::AlignTop);
  return l;
}

}  // namespace

QColor PlanView::usableLineColor() {
  return paletteColor(telemetry::Meaning::usable_limit);
}

QColor PlanView::hbmLineColor() {
  return paletteColor(telemetry::Meaning::hbm_limit);
}

int PlanView::stageLabelStep(int stages) {
  if ((stages & (stages - 1)) == 0) {  // a power of two: so is the step (0, 4, 8, ... of 64)
    int step = 1;
    while (stages > step * kMaxStageLabels) step *= 2;
    return step;
  }
  for (int scale = 1;; scale *= 10)
    for (int step : {1, 2, 5})
      if (stages <= step * scale * kMaxStageLabels) return step * scale;
}

QWidget* PlanView::buildCharts() {
  memory_chart_ = new QChart;
  memory_chart_->setAnimationOptions(QChart::NoAnimation);
  memory_chart_->legend()->setAlignment(Qt::AlignRight);
  memory_chart_->setMargins(QMargins(4, 4, 4, 4));
  memory_series_ = new QStackedBarSeries;
  memory_series_->setBarWidth(0.8);
  usable_line_ = new QLineSeries;
  usable_line_->setPen(QPen(usableLineColor(), 2, Qt::DashLine));
  hbm_line_ = new QLineSeries;
  hbm_line_->setPen(QPen(hbmLineColor(), 2));
  stage_axis_ = new QCategoryAxis;
  stage_axis_->setLabelsPosition(QCategoryAxis::AxisLabelsPositionOnValue);
  stage_axis_->setTitleText(tr("pipeline stage"));
  gib_axis_ = new QValueAxis;
  gib_axis_->setTitleText(tr("GiB per GPU"));
  gib_axis_->setLabelFormat(QStringLiteral("%.0f"));
  gib_axis_->setTickType(QValueAxis::TicksDynamic);
  gib_axis_->setTickAnchor(0);
  memory_chart_->addAxis(stage_axis_, Qt::AlignBottom);
  memory_chart_->addAxis(gib_axis_, Qt::AlignLeft);
  for (QAbstractSeries* s :
       std::initializer_list<QAbstractSeries*>{memory_series_, usable_line_, hbm_line_}) {
    memory_chart_->addSeries(s);
    s->attachAxis(stage_axis_);
    s->attachAxis(gib_axis_);
  }
  memory_view_ = view_of(memory_chart_);
  memory_view_->setObjectName(QStringLiteral("planMemoryChart"));
  memory_view_->setMinimumSize(420, 280);

  time_chart_ = new QChart;
  time_chart_->setAnimationOptions(QChart::NoAnimation);
  time_chart_->legend()->setAlignment(Qt::AlignRight);
  time_chart_->setMargins(QMargins(4, 4, 4, 4));
  time_chart_->setTitle(tr("Time of one step"));
  time_series_ = new QHorizontalStackedBarSeries;
  time_series_->setBarWidth(0.7);
  step_axis_ = new QBarCategoryAxis;
  step_axis_->append(tr("step"));
  seconds_axis_ = new QValueAxis;
  seconds_axis_->setTitleText(tr("seconds"));
  seconds_axis_->setLabelFormat(QStringLiteral("%.3g"));
  time_chart_->addSeries(time_series_);
  time_chart_->addAxis(step_axis_, Qt::AlignLeft);
  time_chart_->addAxis(seconds_axis_, Qt::AlignBottom);
  time_series_->attachAxis(step_axis_);
  time_series_->attachAxis(seconds_axis_);
  auto* time_view = view_of(time_chart_);
  time_view->setObjectName(QStringLiteral("planTimeChart"));
  time_view->setMinimumHeight(200);
  time_view->setMaximumHeight(240);

  mfu_ = text_label("planMfu");
  why_ = text_label("planWhy");
  left_out_ = text_label("planLeftOut");
  left_out_->setStyleSheet(QStringLiteral("color: #555555;"));

  auto* side = new QWidget;
  auto* side_layout = new QVBoxLayout(side);
  side_layout->setContentsMargins(0, 0, 0, 0);
  side_layout->addWidget(time_view);
  side_layout->addWidget(mfu_);
  side_layout->addWidget(why_);
  side_layout->addWidget(left_out_);
  side_layout->addStretch();

  auto* charts = new QWidget;
  auto* layout = new QHBoxLayout(charts);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(memory_view_, 3);
  layout->addWidget(side, 2);
  return charts;
}

void PlanView::drawMemory(const plan::Estimate& e) {
  const int n = static_cast<int>(e.stages.size());
  QList<QBarSet*> sets;
  double tallest = 0;
  for (const plan::MemoryBreakdown& m : e.stages) tallest = std::max(tallest, m.total());
  for (const auto& [category, member] : kMemory) {
    auto* set = new QBarSet(QString::fromLatin1(to_string(category)));
    const QColor color = MemoryView::categoryColor(category);
    set->setColor(color);
    set->setBorderColor(n > 24 ? color : color.darker(140));
    QList<qreal> values;
    values.reserve(n);
    for (const plan::MemoryBreakdown& m : e.stages) values << m.*member / kGiB;
    set->append(values);
    connect(set, &QBarSet::hovered, this, [this, category, member](bool on, int stage) {
      if (!on || shown_ < 0) return QToolTip::hideText();
      const plan::Estimate& shown = result_.plans[static_cast<size_t>(shown_)];
      if (stage < 0 || stage >= static_cast<int>(shown.stages.size())) return;
      const plan::MemoryBreakdown& m = shown.stages[static_cast<size_t>(stage)];
      QToolTip::showText(QCursor::pos(),
                         tr("stage %1: %2 %3 GiB; %4 of %5 GiB usable on the stage")
                             .arg(stage)
                             .arg(QString::fromLatin1(to_string(category)))
                             .arg(m.*member / kGiB, 0, 'f', 2)
                             .arg(m.total() / kGiB, 0, 'f', 1)
                             .arg(shown.usable_bytes / kGiB, 0, 'f', 1),
                         memory_view_);
    });
    sets << set;
  }
  memory_series_->clear();  // deletes the old sets
  if (n > 0)
    memory_series_->append(sets);
  else
    qDeleteAll(sets);

  for (const QString& label : stage_axis_->categoriesLabels()) stage_axis_->remove(label);
  stage_axis_->setStartValue(-0.5);
  const int step = stageLabelStep(std::max(n, 1));
  for (int s = 0; s < n; s += step) stage_axis_->append(QString::number(s), s);
  stage_axis_->setRange(-0.5, std::max(n, 1) - 0.5);

  const double usable = e.usable_bytes / kGiB;
  const double hbm = inputs_ && n > 0 ? inputs_->cluster.gpu.hbm_bytes / kGiB : 0;
  if (n > 0) {
    usable_line_->replace({QPointF(-0.5, usable), QPointF(n - 0.5, usable)});
    hbm_line_->replace({QPointF(-0.5, hbm), QPointF(n - 0.5, hbm)});
    usable_line_->setName(tr("usable %1 GiB").arg(usable, 0, 'f', 1));
    hbm_line_->setName(tr("HBM %1 GiB").arg(hbm, 0, 'f', 0));
    memory_chart_->setTitle(
        n == 1
            ? tr("Memory per GPU, one pipeline stage, plan #%1").arg(shown_ + 1)
            : tr("Memory per GPU on each of %1 pipeline stages, plan #%2").arg(n).arg(shown_ + 1));
  } else {
    usable_line_->clear();
    hbm_line_->clear();
    usable_line_->setName(tr("usable"));
    hbm_line_->setName(tr("HBM"));
    memory_chart_->setTitle(tr("Memory per GPU on each pipeline stage"));
  }
  // A tick every 1, 2 or 5 x 10^k GiB, some 5 to 10 of them, up past the tallest bar and HBM.
  const double top = std::max({tallest / kGiB, hbm, 1.0}) * 1.05;
  double tick = 1;
  while (top / tick > 10) tick *= tick_growth(tick);
  gib_axis_->setTickInterval(tick);
  gib_axis_->setRange(0, std::ceil(top / tick) * tick);
}

void PlanView::drawTime(const plan::Estimate& e) {
  QList<QBarSet*> sets;
  for (const TimePart& p : time_parts()) {
    const double s = e.time.*p.seconds;
    auto* set = new QBarSet(e.step_seconds > 0
                                ? QStringLiteral("%1 %2 s").arg(QLatin1String(p.name), seconds(s))
                                : QString::fromLatin1(p.name));
    set->setColor(p.color);
    set->setBorderColor(p.color.darker(150));
    set->append(s);
    sets << set;
  }
  time_series_->clear();
  if (e.step_seconds > 0)
    time_series_->append(sets);
  else
    qDeleteAll(sets);
  time_chart_->setTitle(e.step_seconds > 0 ? tr("Time of one step: %1 s, MFU %2%")
                                                 .arg(seconds(e.step_seconds))
                                                 .arg(e.mfu * 100, 0, 'f', 0)
                                           : tr("Time of one step"));
  seconds_axis_->setRange(0, e.step_seconds > 0 ? e.step_seconds : 1.0);
  seconds_axis_->applyNiceNumbers();
}

}  // namespace shardlab::gui
