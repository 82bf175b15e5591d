#include "gui/memory_view.h"

#include <QBarCategoryAxis>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QCursor>
#include <QLegend>
#include <QLegendMarker>
#include <QLocale>
#include <QStackedBarSeries>
#include <QToolTip>
#include <QVBoxLayout>
#include <QValueAxis>

#include <algorithm>
#include <utility>

#include "engine/core/error.h"
#include "engine/core/human_format.h"
#include "engine/job/job_spec.h"
#include "engine/plan/memory/planner.h"
#include "gui/palette_color.h"
#include "net/run_model.h"

namespace shardlab::gui {

// --- MemoryViewModel ---

void MemoryViewModel::setJob(const JobSpec& job) {
  predicted_.clear();
  error_.clear();
  note_.clear();
  formula_.clear();

  const std::vector<FieldError> problems = validate(job);
  if (!problems.empty()) {
    error_ = QString::fromStdString(problems.front().to_string());
    if (problems.size() > 1)
      error_ += QStringLiteral(" (and %1 more)").arg(static_cast<qsizetype>(problems.size() - 1));
    return;
  }

  ModelConfig model = job.model;
  if (model.kind == "gpt" && model.gpt.vocab_size == 0) {
    model.gpt.vocab_size = kPlaceholderVocab;
    note_ = QStringLiteral(
                "model.gpt.vocab_size is 0 (taken from the corpus when the job runs): "
                "predicted for %1 symbols")
                .arg(kPlaceholderVocab);
  }

  try {
    JobMemoryPlan plan = plan_job_memory(model, job.optimizer, job.parallel);
    formula_ = QString::fromStdString(plan.formula);
    predicted_ = std::move(plan.steady);
  } catch (const Error& e) {
    error_ = QString::fromUtf8(e.what());
    formula_.clear();
  }
}

void MemoryViewModel::setMeasured(const net::RunModel& run) {
  measured_.clear();
  for (const auto& [rank, state] : run.ranks()) {
    // A rank that has sent no memory event yet reports all zeros: treat it as unmeasured.
    if (std::all_of(state.memory.begin(), state.memory.end(), [](int64_t b) { return b == 0; }))
      continue;
    MemoryFigures f;
    f.bytes = state.memory;
    measured_[rank] = f;
  }
}

int MemoryViewModel::ranks() const {
  int n = static_cast<int>(predicted_.size());
  if (!measured_.empty()) n = std::max(n, measured_.rbegin()->first + 1);
  return n;
}

int64_t MemoryViewModel::predicted(int rank, MemCategory category) const {
  if (rank < 0 || rank >= static_cast<int>(predicted_.size())) return 0;
  return predicted_[static_cast<size_t>(rank)][category];
}

std::optional<int64_t> MemoryViewModel::measured(int rank, MemCategory category) const {
  const auto it = measured_.find(rank);
  if (it == measured_.end()) return std::nullopt;
  return it->second[category];
}

// --- MemoryView ---

namespace {

QString category_label(MemCategory c) {
  if (c == MemCategory::activations)
    return QStringLiteral("activations (measured only: not planned)");
  return QString::fromLatin1(to_string(c));
}

QString format_bytes(int64_t bytes) {
  return QStringLiteral("%1 (%2 bytes)")
      .arg(QString::fromStdString(shardlab::human_bytes(bytes, {.decimals = 2, .gib_decimals = 2})))
      .arg(bytes);
}

}  // namespace

QColor MemoryView::categoryColor(MemCategory c) {
  return paletteColor(c);
}

MemoryView::MemoryView(QWidget* parent) : QWidget(parent) {
  chart_ = new QChart();
  chart_->setTitle(tr("Memory per rank: planned (P) beside measured (M)"));
  chart_->setAnimationOptions(QChart::NoAnimation);
  chart_->legend()->setAlignment(Qt::AlignBottom);
  series_ = new QStackedBarSeries();
  series_->setBarWidth(0.8);
  chart_->addSeries(series_);
  axis_x_ = new QBarCategoryAxis();
  axis_y_ = new QValueAxis();
  axis_y_->setLabelFormat("%.3g");
  chart_->addAxis(axis_x_, Qt::AlignBottom);
  chart_->addAxis(axis_y_, Qt::AlignLeft);
  series_->attachAxis(axis_x_);
  series_->attachAxis(axis_y_);

  view_ = new QChartView(chart_, this);  // takes ownership of the chart
  view_->setObjectName("memoryChart");
  view_->setRenderHint(QPainter::Antialiasing, false);
  status_ = new QLabel(this);
  status_->setObjectName("memoryStatus");
  status_->setWordWrap(true);
  status_->setTextInteractionFlags(Qt::TextSelectableByMouse);

  auto* layout = new QVBoxLayout(this);
  layout->addWidget(view_, 1);
  layout->addWidget(status_);
  rebuild();
}

void MemoryView::setJob(const JobSpec& job) {
  model_.setJob(job);
  rebuild();
}

void MemoryView::setMeasured(const net::RunModel& run) {
  model_.setMeasured(run);
  rebuild();
}

void MemoryView::rebuild() {
  const int ranks = model_.ranks();
  const int drawn = std::min(ranks, kMaxDrawnRanks);

  // Bytes of the tallest bar choose the axis unit.
  int64_t tallest = 0;
  for (int r = 0; r < drawn; ++r) {
    int64_t planned = 0, measured = 0;
    for (MemCategory c : kDrawnCategories) {
      planned += model_.predicted(r, c);
      measured += model_.measured(r, c).value_or(0);
    }
    tallest = std::max({tallest, planned, measured});
  }
  static const std::pair<double, const char*> kUnits[] = {
      {1024.0 * 1024 * 1024, "GiB"}, {1024.0 * 1024, "MiB"}, {1024.0, "KiB"}, {1.0, "B"}};
  for (const auto& [size, name] : kUnits) {
    unit_ = size;
    unit_name_ = QString::fromLatin1(name);
    if (static_cast<double>(tallest) >= size) break;
  }

  // New sets, filled before they join the series: one replacement, no per-point appends.
  QList<QBarSet*> sets;
  for (MemCategory c : kDrawnCategories) {
    auto* set = new QBarSet(category_label(c));
    const QColor color = categoryColor(c);
    set->setColor(color);
    set->setBorderColor(color.darker(140));
    // Measured bars are drawn darker (as "selected" bars) to tell them from the planned ones.
    set->setSelectedColor(color.darker(130));
    QList<qreal> values;
    values.reserve(2 * drawn);
    QList<int> measured_bars;
    for (int r = 0; r < drawn; ++r) {
      values << static_cast<double>(model_.predicted(r, c)) / unit_;
      values << static_cast<double>(model_.measured(r, c).value_or(0)) / unit_;
      measured_bars << 2 * r + 1;
    }
    set->append(values);
    set->selectBars(measured_bars);
    connect(set, &QBarSet::hovered, this,
            [this, c](bool hovering, int index) { showTip(hovering, index, c); });
    sets << set;
  }
  QStringList categories;
  categories.reserve(2 * drawn);
  for (int r = 0; r < drawn; ++r)
    categories << QStringLiteral("P%1").arg(r) << QStringLiteral("M%1").arg(r);

  series_->clear();  // deletes the old sets
  axis_x_->clear();
  axis_x_->append(categories);
  series_->append(sets);
  axis_y_->setRange(0, tallest > 0 ? static_cast<double>(tallest) / unit_ * 1.05 : 1.0);
  axis_y_->setTitleText(tr("steady memory (%1)").arg(unit_name_));

  QStringList lines;
  if (ranks > kMaxDrawnRanks) lines << tr("first %1 of %2 ranks").arg(kMaxDrawnRanks).arg(ranks);
  if (!model_.error().isEmpty()) lines << tr("No prediction: %1").arg(model_.error());
  if (!model_.note().isEmpty()) lines << model_.note();
  if (!model_.formula().isEmpty())
    lines << tr("Planned (steady, between steps): %1; activations are not planned.")
                 .arg(model_.formula());
  status_->setText(lines.join('\n'));
  status_->setStyleSheet(model_.error().isEmpty() ? QString() : "color: #b71c1c;");
}

void MemoryView::showTip(bool hovering, int index, MemCategory category) {
  if (!hovering || index < 0) {
    QToolTip::hideText();
    return;
  }
  const int rank = index / 2;
  const bool planned = index % 2 == 0;
  QString text;
  if (planned) {
    text = category == MemCategory::activations
               ? tr("rank %1 planned activations: not predicted by the planner").arg(rank)
               : tr("rank %1 planned %2: %3")
                     .arg(rank)
                     .arg(QString::fromLatin1(to_string(category)))
                     .arg(format_bytes(model_.predicted(rank, category)));
  } else {
    const std::optional<int64_t> m = model_.measured(rank, category);
    text = m ? tr("rank %1 measured %2: %3")
                   .arg(rank)
                   .arg(QString::fromLatin1(to_string(category)))
                   .arg(format_bytes(*m))
             : tr("rank %1: no memory reported yet").arg(rank);
  }
  QToolTip::showText(QCursor::pos(), text, view_);
}

}  // namespace shardlab::gui
