#include "gui/timeline_view.h"
#include "gui/palette_color.h"
#include "gui/tool_tip.h"

#include <QFontMetrics>
#include <QHelpEvent>
#include <QPaintEvent>
#include <QPainter>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>

#include "net/run_model.h"

namespace shardlab::gui {

namespace {

constexpr int kMargin = 4;
constexpr int kGap = 6;
constexpr int kSwatch = 10;

bool isCompute(net::SpanKind kind) {
  return kind != net::SpanKind::collective;
}

QString formatMs(double seconds) {
  const double ms = seconds * 1e3;
  const int decimals = std::abs(ms) < 10 ? 3 : std::abs(ms) < 100 ? 2 : 1;
  return QString::number(ms, 'f', decimals) + QStringLiteral(" ms");
}

// The smallest of 1, 2, 5, 10, 20, 50, ... that is at least `x`.
int niceStep(double x) {
  for (int base = 1;; base *= 10)
    for (int m : {1, 2, 5})
      if (m * base >= x) return m * base;
}

// The pixel columns [x0, x1) a span covers: edges rounded to the nearest column boundary, so
// spans that touch in time do not share a column; at least one column, so short spans show.
template <class Item>
std::pair<int, int> columns(const Item& it, double scale, int width) {
  const int x0 = std::clamp(static_cast<int>(std::lround(it.start * scale)), 0, width - 1);
  const int x1 = std::clamp(static_cast<int>(std::lround(it.end * scale)), x0 + 1, width);
  return {x0, x1};
}

QString csvField(const QString& s) {
  if (!s.contains(',') && !s.contains('"') && !s.contains('\n')) return s;
  QString q = s;
  q.replace('"', QStringLiteral("\"\""));
  return '"' + q + '"';
}

}  // namespace

QColor TimelineView::kindColor(net::SpanKind kind) {
  switch (kind) {
    case net::SpanKind::forward:
      return paletteColor(telemetry::Phase::forward);
    case net::SpanKind::backward:
      return paletteColor(telemetry::Phase::backward);
    case net::SpanKind::optimizer:
      return paletteColor(telemetry::Phase::optimizer);
    case net::SpanKind::collective:
      return paletteColor(telemetry::Meaning::collective);
  }
  return Qt::black;
}

QColor TimelineView::failedColor() {
  return paletteColor(telemetry::Meaning::failed);
}

QColor TimelineView::idleColor() {
  return paletteColor(telemetry::Meaning::idle);
}

QColor TimelineView::computeColor(net::SpanKind kind, int chunk) {
  const QColor base = kindColor(kind);
  return chunk % 2 == 1 ? QColor(base.lighter(150).rgb()) : base;  // an RGB colour, as drawn
}

TimelineView::TimelineView(QWidget* parent) : QWidget(parent) {
  setAttribute(Qt::WA_OpaquePaintEvent);  // paintEvent fills its whole dirty region
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Expanding);
}

void TimelineView::setSteps(int steps) {
  steps = std::max(steps, 1);
  if (steps == steps_) return;
  steps_ = steps;
  emit stepsChanged(steps_);
}

void TimelineView::update(const net::RunModel& run) {
  const net::Timeline& tl = run.timeline();
  window_ = tl.recent_window(steps_);
  const double t0 = window_.first, t1 = window_.second;
  const int n = t1 > t0 ? tl.ranks() : 0;
  lanes_.assign(static_cast<size_t>(n), Lane{});
  chunked_ = false;
  const std::map<int, net::RankPlace> places = run.places();
  for (int r = 0; r < n; ++r) {
    Lane& lane = lanes_[static_cast<size_t>(r)];
    // A PHASE's stage is its virtual stage, chunk * pp + stage (timeline.h).
    // Without the rank's HELLO the depth is unknown and every span counts as chunk 0.
    const auto place = places.find(r);
    const int pp = place == places.end() ? 0 : place->second.pp;
    for (const net::Span& s : tl.spans(r)) {
      if (s.start > t1) break;  // sorted by start: nothing later overlaps
      if (s.end < t0) continue;
      const int32_t chunk = pp >= 1 && s.virtual_stage > 0 ? s.virtual_stage / pp : 0;
      chunked_ = chunked_ || chunk > 0;
      lane.items.push_back(
          Item{s.start - t0, s.end - t0, s.kind, s.micro_batch, chunk, s.label, s.ok});
    }
    for (const net::StepMark& m : tl.steps(r))
      if (m.end >= t0 && m.end <= t1) lane.marks.push_back(m.end - t0);
    lane.idle = 1.0 - tl.busy_seconds(r, t0, t1) / (t1 - t0);
  }
  labels_.clear();
  labels_.reserve(tl.labels().size());
  for (const std::string& l : tl.labels()) labels_.push_back(QString::fromStdString(l));
  dirty_ = true;
  QWidget::update();
}

QColor TimelineView::colorAt(int rank, double time) const {
  if (rank < 0 || rank >= ranks() || length() <= 0) return QColor();
  const double t = time - window_.first;
  if (t < 0 || t > length()) return QColor();
  const std::vector<Item>& items = lanes_[static_cast<size_t>(rank)].items;
  const Item* collective = nullptr;
  for (auto it = items.rbegin(); it != items.rend(); ++it) {
    if (t < it->start || t >= it->end) continue;
    if (isCompute(it->kind)) return computeColor(it->kind, it->chunk);
    if (collective == nullptr) collective = &*it;
  }
  if (collective != nullptr) return collective->ok ? kindColor(collective->kind) : failedColor();
  return idleColor();
}

double TimelineView::idleFraction(int rank) const {
  if (rank < 0 || rank >= ranks()) return 0;
  return lanes_[static_cast<size_t>(rank)].idle;
}

void TimelineView::ensureLayout() const {
  if (!dirty_ && layout_size_ == size()) return;
  dirty_ = false;
  layout_size_ = size();
  texts_.clear();
  swatches_.clear();
  image_ = QImage();
  plot_ = QRect();
  lane_h_ = 0;
  visible_ = 0;

  const QFontMetrics fm(font());
  const int line = fm.height();
  auto add = [&](double x, double y, const QString& text) {
    Text t;
    t.at = QPointF(x, y);
    t.text.setText(text);
    t.text.setTextFormat(Qt::PlainText);
    t.text.prepare(QTransform(), font());
    texts_.push_back(std::move(t));
  };

  // Legend row.
  int x = kMargin;
  const int legend_y = kMargin;
  const std::array<std::pair<QString, QColor>, 5> legend = {{
      {tr("forward"), kindColor(net::SpanKind::forward)},
      {tr("backward"), kindColor(net::SpanKind::backward)},
      {tr("optimizer"), kindColor(net::SpanKind::optimizer)},
      {tr("collective"), kindColor(net::SpanKind::collective)},
      {tr("idle"), idleColor()},
  }};
  for (const auto& [name, color] : legend) {
    swatches_.emplace_back(QRect(x, legend_y + (line - kSwatch) / 2, kSwatch, kSwatch), color);
    x += kSwatch + 4;
    add(x, legend_y, name);
    x += fm.horizontalAdvance(name) + 2 * kGap;
  }
  if (chunked_) {  // interleaved: odd chunks' forward and backward swatches side by side
    for (net::SpanKind kind : {net::SpanKind::forward, net::SpanKind::backward}) {
      swatches_.emplace_back(QRect(x, legend_y + (line - kSwatch) / 2, kSwatch, kSwatch),
                             computeColor(kind, 1));
      x += kSwatch + 2;
    }
    const QString name = tr("odd chunks");
    add(x + 2, legend_y, name);
    x += 2 + fm.horizontalAdvance(name) + 2 * kGap;
  }

  const int n = ranks();
  const QString last_rank = QString::number(std::max(n - 1, 0));
  const int gutter = fm.horizontalAdvance(last_rank) + kGap;
  const int top = legend_y + line + kGap / 2;
  const int bottom = height() - kMargin - line - 2;  // time labels below
  plot_ = QRect(QPoint(kMargin + gutter, top), QPoint(width() - kMargin - 1, bottom - 1));
  if (plot_.width() < 1 || plot_.height() < 1) {
    plot_ = QRect();
    return;
  }
  if (n == 0) {
    add(plot_.left() + 4, plot_.top() + 4, tr("no steps yet"));
    return;
  }

  lane_h_ = std::max(1, plot_.height() / n);
  visible_ = std::min(n, plot_.height() / lane_h_);
  const QString note =
      visible_ < n
          ? tr("%1 window, ranks 0-%2 of %3 shown").arg(formatMs(length())).arg(visible_ - 1).arg(n)
          : tr("%1 window").arg(formatMs(length()));
  if (x + fm.horizontalAdvance(note) < width() - kMargin)
    add(width() - kMargin - fm.horizontalAdvance(note), legend_y, note);

  // Time axis.
  const double by = plot_.top() + visible_ * lane_h_ + 2;
  add(plot_.left(), by, QStringLiteral("0 ms"));
  const QString end = formatMs(length());
  add(plot_.right() + 1 - fm.horizontalAdvance(end), by, end);

  // Rank labels: every k-th lane, k chosen so that labels do not overlap.
  const int k = niceStep(static_cast<double>(line) / lane_h_);
  for (int r = 0; r < visible_; r += k) {
    const QString t = QString::number(r);
    add(plot_.left() - kGap / 2.0 - fm.horizontalAdvance(t),
        std::max(plot_.top() + r * lane_h_ + lane_h_ / 2.0 - line / 2.0, plot_.top() - kGap / 2.0),
        t);
  }

  // Rasterise the lanes: per pixel column, the compute kind and whether a collective runs.
  const int W = plot_.width();
  const int h = lane_h_;
  const int fill_h = h >= 4 ? h - 1 : h;  // a 1-px gap between lanes when there is room
  const int band0 = fill_h >= 3 ? fill_h / 3 : fill_h;
  const int band1 = fill_h >= 3 ? fill_h - fill_h / 3 : fill_h;
  image_ = QImage(W, visible_ * h, QImage::Format_RGB32);
  image_.fill(backgroundColor());
  const double scale = W / length();
  const QRgb idle = idleColor().rgb(), mark = stepLineColor().rgb(),
             coll_ok = kindColor(net::SpanKind::collective).rgb(), coll_bad = failedColor().rgb();
  // Compute colours by kind, then the same kinds on odd chunks (index kind + 3).
  const std::array<QRgb, 6> compute = {computeColor(net::SpanKind::forward, 0).rgb(),
                                       computeColor(net::SpanKind::backward, 0).rgb(),
                                       computeColor(net::SpanKind::optimizer, 0).rgb(),
                                       computeColor(net::SpanKind::forward, 1).rgb(),
                                       computeColor(net::SpanKind::backward, 1).rgb(),
                                       computeColor(net::SpanKind::optimizer, 1).rgb()};
  std::vector<QRgb> full(static_cast<size_t>(W)), band(static_cast<size_t>(W));
  std::vector<int8_t> comp(static_cast<size_t>(W)), coll(static_cast<size_t>(W));
  for (int r = 0; r < visible_; ++r) {
    const Lane& lane = lanes_[static_cast<size_t>(r)];
    std::fill(comp.begin(), comp.end(), int8_t{-1});
    std::fill(coll.begin(), coll.end(), int8_t{0});
    for (const Item& it : lane.items) {
      const auto [x0, x1] = columns(it, scale, W);
      if (isCompute(it.kind)) {
        std::fill(comp.begin() + x0, comp.begin() + x1,
                  static_cast<int8_t>(static_cast<int>(it.kind) + (it.chunk % 2 == 1 ? 3 : 0)));
      } else {
        for (int c = x0; c < x1; ++c)
          coll[static_cast<size_t>(c)] =
              std::max<int8_t>(coll[static_cast<size_t>(c)], it.ok ? 1 : 2);
      }
    }
    for (size_t c = 0; c < static_cast<size_t>(W); ++c) {
      const QRgb cc = coll[c] == 2 ? coll_bad : coll_ok;
      full[c] = comp[c] >= 0 ? compute[static_cast<size_t>(comp[c])] : coll[c] ? cc : idle;
      band[c] = coll[c] ? cc : full[c];
    }
    for (double m : lane.marks) {
      const auto c = static_cast<size_t>(std::clamp(static_cast<int>(m * scale), 0, W - 1));
      full[c] = band[c] = mark;
    }
    for (int y = 0; y < fill_h; ++y) {
      const std::vector<QRgb>& src = y >= band0 && y < band1 ? band : full;
      std::copy(src.begin(), src.end(), reinterpret_cast<QRgb*>(image_.scanLine(r * h + y)));
    }
  }
}

QRect TimelineView::plotRect() const {
  ensureLayout();
  return plot_;
}

int TimelineView::laneHeight() const {
  ensureLayout();
  return lane_h_;
}

int TimelineView::visibleRanks() const {
  ensureLayout();
  return visible_;
}

QRect TimelineView::laneRect(int rank) const {
  ensureLayout();
  if (rank < 0 || rank >= visible_) return QRect();
  const int fill_h = lane_h_ >= 4 ? lane_h_ - 1 : lane_h_;
  return QRect(plot_.left(), plot_.top() + rank * lane_h_, plot_.width(), fill_h);
}

const TimelineView::Item* TimelineView::itemAt(int rank, int x) const {
  const std::vector<Item>& items = lanes_[static_cast<size_t>(rank)].items;
  const int W = plot_.width();
  const double scale = W / length();
  const Item* collective = nullptr;
  for (auto it = items.rbegin(); it != items.rend(); ++it) {
    const auto [x0, x1] = columns(*it, scale, W);
    if (x < x0 || x >= x1) continue;
    if (isCompute(it->kind)) return &*it;
    if (collective == nullptr) collective = &*it;
  }
  return collective;
}

QString TimelineView::toolTipAt(QPoint p) const {
  ensureLayout();
  if (visible_ == 0 || plot_.isNull() || length() <= 0) return QString();
  const int rank = (p.y() - plot_.top()) / lane_h_;
  if (p.y() < plot_.top() || rank >= visible_ || p.x() < plot_.left() || p.x() > plot_.right())
    return QString();
  const Item* it = itemAt(rank, p.x() - plot_.left());
  if (it == nullptr)
    return tr("rank %1: idle (%2% of the window)")
        .arg(rank)
        .arg(lanes_[static_cast<size_t>(rank)].idle * 100, 0, 'f', 1);
  const QString duration = formatMs(it->end - it->start);
  switch (it->kind) {
    case net::SpanKind::forward:
    case net::SpanKind::backward:
      if (chunked_)
        return tr("rank %1: %2, micro-batch %3, chunk %4, %5")
            .arg(rank)
            .arg(QString::fromLatin1(net::to_string(it->kind)))
            .arg(it->micro_batch)
            .arg(it->chunk)
            .arg(duration);
      return tr("rank %1: %2, micro-batch %3, %4")
          .arg(rank)
          .arg(QString::fromLatin1(net::to_string(it->kind)))
          .arg(it->micro_batch)
          .arg(duration);
    case net::SpanKind::optimizer:
      return tr("rank %1: optimizer, %2").arg(rank).arg(duration);
    case net::SpanKind::collective:
      break;
  }
  const QString label = it->label < labels_.size() ? labels_[it->label] : tr("collective");
  return tr("rank %1: %2, %3%4")
      .arg(rank)
      .arg(label)
      .arg(duration)
      .arg(it->ok ? QString() : tr(" (failed)"));
}

QString TimelineView::csv() const {
  QString out = QStringLiteral("rank,kind,label,start,end\n");
  for (size_t r = 0; r < lanes_.size(); ++r) {
    for (const Item& it : lanes_[r].items) {
      QString label;
      if (it.kind == net::SpanKind::forward || it.kind == net::SpanKind::backward)
        label = it.chunk > 0 ? QStringLiteral("%1@%2").arg(it.micro_batch).arg(it.chunk)
                             : QString::number(it.micro_batch);
      else if (it.kind == net::SpanKind::collective)
        label = (it.label < labels_.size() ? labels_[it.label] : QString()) +
                (it.ok ? QString() : QStringLiteral(" (failed)"));
      out += QString::number(r) + ',' + QString::fromLatin1(net::to_string(it.kind)) + ',' +
             csvField(label) + ',' + QString::number(it.start, 'g', 9) + ',' +
             QString::number(it.end, 'g', 9) + '\n';
    }
  }
  return out;
}

bool TimelineView::event(QEvent* event) {
  if (showToolTip(this, event, [this](QPoint at) { return toolTipAt(at); })) return true;
  return QWidget::event(event);
}

void TimelineView::paintEvent(QPaintEvent* event) {
  ensureLayout();
  QPainter p(this);
  p.fillRect(event->rect(), backgroundColor());
  if (!image_.isNull()) p.drawImage(plot_.topLeft(), image_);
  for (const auto& [rect, color] : swatches_) p.fillRect(rect, color);
  p.setPen(palette().color(QPalette::WindowText));
  for (const Text& t : texts_) p.drawStaticText(t.at, t.text);
}

void TimelineView::resizeEvent(QResizeEvent* event) {
  dirty_ = true;
  QWidget::resizeEvent(event);
}

}  // namespace shardlab::gui
