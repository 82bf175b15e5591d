#include "gui/memory_view.h"

#include <QBarCategoryAxis>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QCheckBox>
#include <QCursor>
#include <QFontMetricsF>
#include <QGraphicsSimpleTextItem>
#include <QHBoxLayout>
#include <QLegend>
#include <QStackedBarSeries>
#include <QToolTip>
#include <QVBoxLayout>
#include <QValueAxis>

#include <algorithm>
#include <cmath>
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

// The legend's words for a category: its name in full (the engine's, as in the tooltips and on the
// web page), and for activations that the planner leaves them out.
QString category_label(MemCategory c) {
  if (c == MemCategory::activations) return QStringLiteral("activations (not planned)");
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
  chart_->legend()->hide();  // the view's own legend (legend_) never elides an entry
  series_ = new QStackedBarSeries();
  series_->setBarWidth(0.8);
  chart_->addSeries(series_);
  axis_x_ = new QBarCategoryAxis();
  axis_x_->setLabelsVisible(false);  // placeLabels() draws them, never elided
  axis_y_ = new QValueAxis();
  axis_y_->setLabelFormat("%.3g");
  chart_->addAxis(axis_x_, Qt::AlignBottom);
  chart_->addAxis(axis_y_, Qt::AlignLeft);
  series_->attachAxis(axis_x_);
  series_->attachAxis(axis_y_);
  // Room under the plot for placeLabels()'s three rows.
  QGraphicsSimpleTextItem probe(QStringLiteral("Mg0"));
  probe.setFont(axis_x_->labelsFont());
  QMargins margins = chart_->margins();
  margins.setBottom(static_cast<int>(std::ceil(3 * probe.boundingRect().height())) + 12);
  chart_->setMargins(margins);
  connect(chart_, &QChart::plotAreaChanged, this, [this] { placeLabels(); });

  view_ = new QChartView(chart_, this);  // takes ownership of the chart
  view_->setObjectName("memoryChart");
  view_->setRenderHint(QPainter::Antialiasing, false);

  states_box_ = new QCheckBox(tr("Model states only"), this);
  states_box_->setObjectName("memoryModelStatesOnly");
  states_box_->setToolTip(
      tr("Draw parameters, gradients and optimizer state alone, on their own scale, without the "
         "activations (which can dwarf them). Until you click it, it is on when the model states "
         "would be under %1% of the tallest bar.")
          .arg(static_cast<int>(kModelStatesShare * 100)));
  connect(states_box_, &QCheckBox::clicked, this, [this](bool on) { setModelStatesOnly(on); });

  legend_ = new QLabel(this);
  legend_->setObjectName("memoryLegend");
  legend_->setWordWrap(true);
  legend_->setTextFormat(Qt::RichText);

  status_ = new QLabel(this);
  status_->setObjectName("memoryStatus");
  status_->setWordWrap(true);
  status_->setTextInteractionFlags(Qt::TextSelectableByMouse);

  auto* top = new QHBoxLayout;
  top->setContentsMargins(0, 0, 0, 0);
  top->addWidget(states_box_);
  top->addStretch(1);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(top);
  layout->addWidget(view_, 1);
  layout->addWidget(legend_);
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

void MemoryView::setModelStatesOnly(bool on) {
  user_chose_ = true;
  if (states_box_->isChecked() != on) states_box_->setChecked(on);
  if (on == states_only_) return;
  states_only_ = on;
  rebuild();
}

void MemoryView::rebuild() {
  const int ranks = model_.ranks();
  const int drawn = std::min(ranks, kMaxDrawnRanks);
  drawn_ = drawn;

  // The tallest stack of model states and the tallest whole bar (planned or measured).
  int64_t tallest_states = 0, tallest_all = 0, most_activations = 0;
  for (int r = 0; r < drawn; ++r) {
    int64_t planned = 0, measured = 0;
    for (MemCategory c : kModelStates) {
      planned += model_.predicted(r, c);
      measured += model_.measured(r, c).value_or(0);
    }
    tallest_states = std::max({tallest_states, planned, measured});
    const int64_t activations = model_.measured(r, MemCategory::activations).value_or(0);
    most_activations = std::max(most_activations, activations);
    tallest_all = std::max({tallest_all, planned + model_.predicted(r, MemCategory::activations),
                            measured + activations});
  }
  if (!user_chose_) {
    states_only_ = tallest_all > 0 && static_cast<double>(tallest_states) <
                                          kModelStatesShare * static_cast<double>(tallest_all);
    states_box_->setChecked(states_only_);  // setChecked does not emit clicked
  }
  const int64_t tallest = states_only_ ? tallest_states : tallest_all;

  // Bytes of the tallest drawn bar choose the axis unit.
  static const std::pair<double, const char*> kUnits[] = {
      {1024.0 * 1024 * 1024, "GiB"}, {1024.0 * 1024, "MiB"}, {1024.0, "KiB"}, {1.0, "B"}};
  for (const auto& [size, name] : kUnits) {
    unit_ = size;
    unit_name_ = QString::fromLatin1(name);
    if (static_cast<double>(tallest) >= size) break;
  }

  // New sets, filled before they join the series: one replacement, no per-point appends.
  QList<QBarSet*> sets;
  QStringList legend_html;
  legend_entries_.clear();
  for (MemCategory c : kDrawnCategories) {
    if (states_only_ && c == MemCategory::activations) continue;
    const QString label = category_label(c);
    auto* set = new QBarSet(label);
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
    legend_entries_ << label;
    // A swatch and the words, held together by no-break spaces: the label wraps only between
    // entries.
    QString words = label.toHtmlEscaped();
    words.replace(QLatin1Char(' '), QStringLiteral("&nbsp;"));
    legend_html << QStringLiteral("<span style=\"color:%1\">&#9632;</span>&nbsp;%2")
                       .arg(color.name(), words);
  }
  legend_->setText(legend_html.join(QStringLiteral("&nbsp;&nbsp; ")));
  QStringList categories;
  categories.reserve(2 * drawn);
  for (int r = 0; r < drawn; ++r)
    categories << QStringLiteral("P%1").arg(r) << QStringLiteral("M%1").arg(r);

  series_->clear();  // deletes the old sets
  axis_x_->clear();
  axis_x_->append(categories);
  series_->append(sets);
  axis_y_->setRange(0, tallest > 0 ? static_cast<double>(tallest) / unit_ * 1.05 : 1.0);
  axis_y_->setTitleText(states_only_ ? tr("model states (%1)").arg(unit_name_)
                                     : tr("steady memory (%1)").arg(unit_name_));

  QStringList lines;
  if (ranks > kMaxDrawnRanks) lines << tr("first %1 of %2 ranks").arg(kMaxDrawnRanks).arg(ranks);
  if (states_only_ && most_activations > 0)
    lines << tr("Model states only: activations (up to %1 on a rank) are not drawn.")
                 .arg(QString::fromStdString(shardlab::human_bytes(most_activations)));
  if (!model_.error().isEmpty()) lines << tr("No prediction: %1").arg(model_.error());
  if (!model_.note().isEmpty()) lines << model_.note();
  if (!model_.formula().isEmpty())
    lines << tr("Planned (steady, between steps): %1; activations are not planned.")
                 .arg(model_.formula());
  status_->setText(lines.join('\n'));
  status_->setStyleSheet(model_.error().isEmpty() ? QString() : "color: #b71c1c;");
  placeLabels();
}

void MemoryView::placeLabels() {
  qDeleteAll(label_items_);
  label_items_.clear();
  const QRectF plot = chart_->plotArea();
  if (drawn_ == 0 || plot.width() <= 0) return;
  const QFont font = axis_x_->labelsFont();
  const QFontMetricsF fm(font);
  const QBrush ink = axis_y_->labelsBrush();
  const double chart_w = chart_->size().width();
  double row = 0;  // the height of the row being placed
  auto add = [&](const QString& text, double centre, double top) {
    auto* item = new QGraphicsSimpleTextItem(text, chart_);
    item->setFont(font);
    item->setBrush(ink);
    item->setZValue(10);
    const QRectF r = item->boundingRect();
    item->setPos(std::clamp(centre - r.width() / 2, 0.0, std::max(0.0, chart_w - r.width())), top);
    row = std::max(row, r.height());
    label_items_ << item;
  };
  const double bar = plot.width() / (2.0 * drawn_);  // one category: a planned or measured bar
  double y = plot.bottom() + 4;
  // "P" and "M" under each bar, when a letter fits with room to spare.
  const bool letters = bar >= fm.horizontalAdvance(QStringLiteral("M")) + 4;
  if (letters) {
    for (int r = 0; r < drawn_; ++r) {
      add(QStringLiteral("P"), plot.left() + (2 * r + 0.5) * bar, y);
      add(QStringLiteral("M"), plot.left() + (2 * r + 1.5) * bar, y);
    }
    y += row + 1;
    row = 0;
  }
  // Rank numbers under each pair: every k-th, k the smallest power of two that keeps a gap of
  // two spaces between the widest neighbours.
  const double widest = fm.horizontalAdvance(QString::number(drawn_ - 1));
  const double gap = 2 * fm.horizontalAdvance(QLatin1Char(' '));
  int k = 1;
  while (k < drawn_ && k * 2 * bar < widest + gap) k *= 2;
  for (int r = 0; r < drawn_; r += k) add(QString::number(r), plot.left() + (r + 0.5) * 2 * bar, y);
  y += row + 1;
  add(letters ? tr("rank (P: planned, M: measured)") : tr("rank (each pair: planned, measured)"),
      plot.center().x(), y);
}

QList<MemoryView::Label> MemoryView::labels() const {
  QList<Label> out;
  for (const QGraphicsSimpleTextItem* item : label_items_)
    out << Label{item->text(), item->sceneBoundingRect()};
  return out;
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
