#include "gui/comm_heat_map.h"
#include "gui/tool_tip.h"

#include <QFontMetrics>
#include <QHelpEvent>
#include <QPaintEvent>
#include <QPainter>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "net/run_model.h"

namespace shardlab::gui {

namespace {

constexpr int kMargin = 6;
constexpr int kLegendBar = 12;
constexpr int kGap = 6;
constexpr double kPercentile = 0.99;

// matplotlib's "inferno" at 11 evenly spaced stops: perceptually uniform, lightness rising
// monotonically from near-black to pale yellow, readable in grey scale and by colour-blind eyes.
constexpr std::array<QRgb, 11> kInferno = {0x000004, 0x160b39, 0x420a68, 0x6a176e,
                                           0x932667, 0xbc3754, 0xdd513a, 0xf37819,
                                           0xfca50a, 0xf6d746, 0xfcffa4};

const std::array<QRgb, 256>& lut() {
  static const std::array<QRgb, 256> table = [] {
    std::array<QRgb, 256> t{};
    const int stops = static_cast<int>(kInferno.size()) - 1;
    for (int i = 0; i < 256; ++i) {
      const double x = i / 255.0 * stops;
      const int k = std::min(static_cast<int>(x), stops - 1);
      const double f = x - k;
      const QRgb a = kInferno[static_cast<size_t>(k)], b = kInferno[static_cast<size_t>(k + 1)];
      auto mix = [f](int u, int v) { return static_cast<int>(std::lround(u + (v - u) * f)); };
      t[static_cast<size_t>(i)] =
          qRgb(mix(qRed(a), qRed(b)), mix(qGreen(a), qGreen(b)), mix(qBlue(a), qBlue(b)));
    }
    return t;
  }();
  return table;
}

QRgb lutAt(double fraction) {
  const double f = std::isfinite(fraction) ? std::clamp(fraction, 0.0, 1.0) : 0.0;
  return lut()[static_cast<size_t>(std::lround(f * 255.0))];
}

QString formatMs(double seconds) {
  const double ms = seconds * 1e3;
  const int decimals = ms < 1 ? 3 : ms < 10 ? 2 : ms < 100 ? 1 : 0;
  return QString::number(ms, 'f', decimals) + QStringLiteral(" ms");
}

}  // namespace

QColor CommHeatMap::scaleColor(double fraction) {
  return QColor(lutAt(fraction));
}

CommHeatMap::CommHeatMap(QWidget* parent) : QWidget(parent) {
  setAttribute(Qt::WA_OpaquePaintEvent);  // paintEvent fills its whole dirty region
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Expanding);
}

QString CommHeatMap::metricName(net::StepMetric metric) {
  return QString::fromLatin1(net::to_string(metric));
}

void CommHeatMap::update(const net::RunModel& run) {
  const net::CommStats& comm = run.comm();
  ranks_ = comm.ranks();
  last_ = comm.last_step();
  first_ = last_ > 0 ? comm.first_step() : 0;
  const int n = steps();
  if (n == 0) {
    ranks_ = 0;
    first_ = last_ = 0;
  }
  // With nothing shown yet there is nothing to explain.
  waits_unknown_ = n > 0 &&
                   (metric_ == net::StepMetric::wait || metric_ == net::StepMetric::transfer) &&
                   !comm.waits_known();
  seconds_.assign(static_cast<size_t>(ranks_) * static_cast<size_t>(n), 0.0f);
  std::vector<float> hot;
  hot.reserve(seconds_.size());
  for (int r = 0; r < ranks_; ++r) {
    float* row = seconds_.data() + static_cast<size_t>(r) * static_cast<size_t>(n);
    for (int s = 0; s < n; ++s) {
      const auto v = static_cast<float>(comm.step_seconds(r, first_ + s, metric_));
      row[s] = v;
      if (v > 0) hot.push_back(v);
    }
  }
  // The scale's top: a high percentile of the cells that communicated at all (zeros would drag
  // it down in a sparse window; the maximum would let one slow collective flatten the rest).
  scale_ = 0;
  if (!hot.empty()) {
    const auto k = static_cast<size_t>(kPercentile * static_cast<double>(hot.size() - 1));
    std::nth_element(hot.begin(), hot.begin() + static_cast<std::ptrdiff_t>(k), hot.end());
    scale_ = hot[k];
  }

  if (n == 0) {
    image_ = QImage();
  } else {
    if (image_.width() != n || image_.height() != ranks_)
      image_ = QImage(n, ranks_, QImage::Format_RGB32);
    const auto& table = lut();
    const double to_index = scale_ > 0 ? 255.0 / scale_ : 0.0;
    for (int r = 0; r < ranks_; ++r) {
      auto* px = reinterpret_cast<QRgb*>(image_.scanLine(r));
      const float* row = seconds_.data() + static_cast<size_t>(r) * static_cast<size_t>(n);
      for (int s = 0; s < n; ++s) {
        const double i = std::min(255.0, static_cast<double>(row[s]) * to_index);
        px[s] = table[static_cast<size_t>(i + 0.5)];
      }
    }
  }
  layout_dirty_ = true;  // the axis and legend labels changed
  display_dirty_ = true;
  QWidget::update();
}

void CommHeatMap::ensureDisplay() const {
  const int rows = plot_.height();
  if (!display_dirty_ && (display_.isNull() || display_.height() == std::min(rows, ranks_))) return;
  display_dirty_ = false;
  const int n = steps();
  if (image_.isNull() || rows <= 0 || rows >= ranks_) {
    display_ = image_;
    return;
  }
  // Pixel row y covers ranks [y * ranks / rows, (y + 1) * ranks / rows): keep each step's
  // coldest, so a straggler's row survives the downscaling.
  display_ = QImage(n, rows, QImage::Format_RGB32);
  const auto& table = lut();
  const double to_index = scale_ > 0 ? 255.0 / scale_ : 0.0;
  std::vector<float> coldest(static_cast<size_t>(n));
  for (int y = 0; y < rows; ++y) {
    const int r0 = static_cast<int>(static_cast<int64_t>(y) * ranks_ / rows);
    const int r1 = std::max(r0 + 1, static_cast<int>(static_cast<int64_t>(y + 1) * ranks_ / rows));
    std::fill(coldest.begin(), coldest.end(), std::numeric_limits<float>::max());
    for (int r = r0; r < r1 && r < ranks_; ++r) {
      const float* row = seconds_.data() + static_cast<size_t>(r) * static_cast<size_t>(n);
      for (int s = 0; s < n; ++s)
        coldest[static_cast<size_t>(s)] = std::min(coldest[static_cast<size_t>(s)], row[s]);
    }
    auto* px = reinterpret_cast<QRgb*>(display_.scanLine(y));
    for (int s = 0; s < n; ++s) {
      const double i =
          std::min(255.0, static_cast<double>(coldest[static_cast<size_t>(s)]) * to_index);
      px[s] = table[static_cast<size_t>(i + 0.5)];
    }
  }
}

double CommHeatMap::cellSeconds(int rank, int64_t step) const {
  if (rank < 0 || rank >= ranks_ || step < first_ || step > last_ || steps() == 0) return 0;
  return seconds_[static_cast<size_t>(rank) * static_cast<size_t>(steps()) +
                  static_cast<size_t>(step - first_)];
}

QColor CommHeatMap::cellColor(int rank, int64_t step) const {
  if (rank < 0 || rank >= ranks_ || step < first_ || step > last_ || steps() == 0) return QColor();
  return image_.pixelColor(static_cast<int>(step - first_), rank);
}

void CommHeatMap::ensureLayout() const {
  if (!layout_dirty_ && layout_size_ == size()) return;
  layout_dirty_ = false;
  layout_size_ = size();
  labels_.clear();
  const QFontMetrics fm(font());
  const QString top_label = scale_ > 0 ? formatMs(scale_) : QStringLiteral("0 ms");
  const QString zero_label = QStringLiteral("0 ms");
  const int legend_text =
      std::max(fm.horizontalAdvance(top_label), fm.horizontalAdvance(zero_label));
  const QString last_rank = QString::number(std::max(ranks_ - 1, 0));
  const int gutter = std::max(fm.horizontalAdvance(last_rank), fm.horizontalAdvance("rank")) + kGap;
  const int line = fm.height();

  const int right = width() - kMargin - legend_text - kGap / 2 - kLegendBar - kGap;
  plot_ = QRect(QPoint(kMargin + gutter, kMargin + line / 2),
                QPoint(right - 1, height() - kMargin - line - kGap / 2 - 1));
  if (plot_.width() < 1 || plot_.height() < 1) plot_ = QRect();
  legend_ = plot_.isNull() ? QRect() : QRect(right + kGap, plot_.top(), kLegendBar, plot_.height());
  if (legend_image_.isNull()) {
    legend_image_ = QImage(1, 256, QImage::Format_RGB32);
    for (int i = 0; i < 256; ++i) legend_image_.setPixel(0, 255 - i, lut()[static_cast<size_t>(i)]);
  }
  if (plot_.isNull()) return;

  auto add = [&](double x, double y, const QString& text) {
    Label l;
    l.at = QPointF(x, y);
    l.text.setText(text);
    l.text.setTextFormat(Qt::PlainText);
    l.text.prepare(QTransform(), font());
    labels_.push_back(std::move(l));
  };
  // Legend: the scale's top and bottom, beside the bar.
  const double lx = legend_.right() + 1 + kGap / 2;
  add(lx, legend_.top() - line / 2.0, top_label);
  add(lx, legend_.bottom() - line / 2.0, zero_label);
  if (ranks_ == 0) {
    add(plot_.left() + 4, plot_.top() + 4, tr("nothing yet"));
    return;
  }
  if (waits_unknown_)
    add(plot_.left() + 4, plot_.top() + 4,
        tr("no %1 figures: this run's backend or recording does not measure waits")
            .arg(metricName(metric_)));
  // Rank axis: the first and the last rank (and "rank" between them when there is room).
  const double row = static_cast<double>(plot_.height()) / ranks_;
  auto right_aligned = [&](const QString& t) {
    return plot_.left() - kGap / 2.0 - fm.horizontalAdvance(t);
  };
  add(right_aligned("0"), plot_.top() + row / 2 - line / 2.0, QStringLiteral("0"));
  if (ranks_ > 1)
    add(right_aligned(last_rank), plot_.bottom() + 1 - row / 2 - line / 2.0, last_rank);
  if (plot_.height() > 4 * line)
    add(right_aligned(QStringLiteral("rank")), plot_.center().y() - line / 2.0,
        QStringLiteral("rank"));
  // Step axis: the first and the newest step under their columns' edges.
  const double by = plot_.bottom() + 1 + kGap / 2.0;
  const QString first = tr("step %1").arg(first_);
  const QString last = QString::number(last_);
  add(plot_.left(), by, first);
  if (last_ != first_ &&
      fm.horizontalAdvance(first) + fm.horizontalAdvance(last) + kGap < plot_.width())
    add(plot_.right() + 1 - fm.horizontalAdvance(last), by, last);
}

QRect CommHeatMap::plotRect() const {
  ensureLayout();
  return plot_;
}

std::pair<int, int64_t> CommHeatMap::cellAt(QPoint p) const {
  ensureLayout();
  if (steps() == 0 || plot_.isNull() || !plot_.contains(p)) return {-1, 0};
  const int rank = std::min(ranks_ - 1, static_cast<int>(static_cast<int64_t>(p.y() - plot_.top()) *
                                                         ranks_ / plot_.height()));
  const int col = std::min(
      steps() - 1,
      static_cast<int>(static_cast<int64_t>(p.x() - plot_.left()) * steps() / plot_.width()));
  return {rank, first_ + col};
}

QString CommHeatMap::toolTipAt(QPoint p) const {
  const auto [rank, step] = cellAt(p);
  if (rank < 0) return QString();
  return tr("rank %1, step %2: %3 %4")
      .arg(rank)
      .arg(step)
      .arg(formatMs(cellSeconds(rank, step)), metricName(metric_));
}

QString CommHeatMap::csv() const {
  QString out = QStringLiteral("rank,step,%1_seconds\n").arg(metricName(metric_));
  const int n = steps();
  out.reserve(out.size() + static_cast<qsizetype>(ranks_) * n * 20);
  for (int r = 0; r < ranks_; ++r)
    for (int s = 0; s < n; ++s)
      out += QString::number(r) + ',' + QString::number(first_ + s) + ',' +
             QString::number(cellSeconds(r, first_ + s), 'g', 7) + '\n';
  return out;
}

bool CommHeatMap::event(QEvent* event) {
  if (showToolTip(this, event, [this](QPoint at) { return toolTipAt(at); })) return true;
  return QWidget::event(event);
}

void CommHeatMap::paintEvent(QPaintEvent* event) {
  ensureLayout();
  QPainter p(this);
  p.fillRect(event->rect(), backgroundColor());
  ensureDisplay();
  if (!display_.isNull() && !plot_.isNull()) p.drawImage(QRectF(plot_), display_);
  if (!legend_.isNull()) p.drawImage(QRectF(legend_), legend_image_);
  p.setPen(palette().color(QPalette::WindowText));
  for (const Label& l : labels_) p.drawStaticText(l.at, l.text);
}

void CommHeatMap::resizeEvent(QResizeEvent* event) {
  layout_dirty_ = true;
  QWidget::resizeEvent(event);
}

}  // namespace shardlab::gui
