#include "gui/holdings_view.h"

#include <QFontMetrics>
#include <QPaintEvent>
#include <QPainter>

#include <algorithm>
#include <cmath>
#include <set>

#include "engine/core/human_format.h"
#include "gui/palette_color.h"
#include "gui/tool_tip.h"
#include "net/run_model.h"
#include "net/step_replay.h"

namespace shardlab::gui {

namespace {

constexpr int kMargin = 6;
constexpr int kGap = 8;
constexpr int kStub = 10;      // the padding stub's width
constexpr int kMinAxis = 160;  // the narrowest axis the minimum size allows
constexpr int kStripPad = 2;   // above and below a strip's lanes, inside its band
constexpr int kStripGap = 3;   // between strips
constexpr int kSwatch = 10;    // legend swatches
constexpr int kMaxListed = 8;  // ranks named in a formula's line before they are counted instead

// 1124 -> "1,124".
QString grouped(int64_t n) {
  QString digits = QString::number(n < 0 ? -n : n);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3)
    digits.insert(i, QLatin1Char(','));
  return n < 0 ? QLatin1Char('-') + digits : digits;
}

QString bytes(int64_t n) {
  return QString::fromStdString(human_bytes(n));
}

// Cheap: the same length and ends.
bool alike(const std::vector<telemetry::LayoutRange>& a,
           const std::vector<telemetry::LayoutRange>& b) {
  return a.size() == b.size() && (a.empty() || (a.front() == b.front() && a.back() == b.back()));
}

QString rankList(const std::vector<int>& ranks) {
  return QString::fromStdString(rank_list(ranks, {.label = true}));
}

}  // namespace

QColor HoldingsView::laneColor(MemCategory category) {
  return paletteColor(category);
}

QColor HoldingsView::partColor(const QColor& color, double share) {
  const double t = 0.25 + 0.5 * std::clamp(share, 0.0, 1.0);  // never as strong as whole
  const QColor e = emptyColor();
  const auto mix = [t](int a, int b) { return static_cast<int>(std::lround(b + (a - b) * t)); };
  return QColor(mix(color.red(), e.red()), mix(color.green(), e.green()),
                mix(color.blue(), e.blue()));
}

HoldingsView::HoldingsView(QWidget* parent) : QWidget(parent) {
  setAttribute(Qt::WA_OpaquePaintEvent);  // paintEvent fills its whole dirty region
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Minimum);
  status_ = tr("No run yet: start a run or open a recording");
}

bool HoldingsView::hasLayout(int rank) const {
  return rank >= 0 && rank < ranks() && strips_[static_cast<size_t>(rank)].known;
}

void HoldingsView::update(const net::RunModel& run) {
  // The layouts are copied again only when the model, its LAYOUT count or the ranks changed, or
  // the model was reset (fewer events than before: a new run, a replay seeking back).
  int n = 0;
  for (const auto& [rank, state] : run.ranks()) {
    n = std::max(n, rank + 1);
    if (state.hello) n = std::max(n, state.hello->world);
  }
  bool same = source_ == &run && source_layouts_ == run.layouts() &&
              run.events() >= source_events_ && n == ranks();
  // Another recording replayed into the same model can have as many LAYOUTs: compare cheaply.
  for (auto it = run.ranks().begin(); same && it != run.ranks().end(); ++it) {
    const Strip& s = strips_[static_cast<size_t>(it->first)];
    const std::optional<telemetry::LayoutEvent>& e = it->second.layout;
    same = s.known == e.has_value() &&
           (!e || (alike(s.held[0], e->params) && alike(s.held[1], e->grads) &&
                   alike(s.held[2], e->optimizer_state) &&
                   s.formula == QString::fromStdString(e->formula)));
  }
  if (!same) takeLayouts(run);
  source_ = &run;
  source_layouts_ = run.layouts();
  source_events_ = run.events();
  takeMeasured(run);
  dirty_ = true;
  updateGeometry();
  QWidget::update();
}

void HoldingsView::takeLayouts(const net::RunModel& run) {
  int n = 0;
  for (const auto& [rank, state] : run.ranks()) {
    n = std::max(n, rank + 1);
    if (state.hello) n = std::max(n, state.hello->world);
  }
  strips_.assign(static_cast<size_t>(n), Strip{});
  tensors_.clear();
  total_ = 0;
  any_layout_ = false;
  header_.clear();
  std::set<std::string> strategies;
  std::vector<std::pair<std::string, std::vector<int>>> formulas;  // in order of first rank
  std::vector<int> truncated;
  std::string topology;
  for (const auto& [rank, state] : run.ranks()) {
    Strip& s = strips_[static_cast<size_t>(rank)];
    if (state.hello) {
      const net::Hello& h = *state.hello;
      s.place = QStringLiteral("pp%1 tp%2 dp%3").arg(h.pp_i).arg(h.tp_i).arg(h.dp_i);
      if (topology.empty())
        topology =
            std::to_string(h.pp) + " × " + std::to_string(h.tp) + " × " + std::to_string(h.dp);
    }
    if (!state.layout) continue;
    const telemetry::LayoutEvent& e = *state.layout;
    s.known = true;
    s.truncated = e.truncated;
    s.formula = QString::fromStdString(e.formula);
    s.held[0] = e.params;
    s.held[1] = e.grads;
    s.held[2] = e.optimizer_state;
    s.lanes.push_back({tr("params"), MemCategory::params, 0, e.params_padding, e.planned[0]});
    s.lanes.push_back({tr("grads"), MemCategory::grads, 1, e.grads_padding, e.planned[1]});
    const auto arrays = static_cast<int64_t>(e.state_arrays.size());
    for (const std::string& name : e.state_arrays)
      s.lanes.push_back({QString::fromStdString(name), MemCategory::optimizer_state, 2,
                         e.state_padding, e.planned[2] / arrays});
    if (!any_layout_) {
      any_layout_ = true;
      tensors_ = e.tensors;
      bytes_per_element_ = e.bytes_per_element;
    }
    strategies.insert(e.strategy);
    auto f = std::find_if(formulas.begin(), formulas.end(),
                          [&](const auto& x) { return x.first == e.formula; });
    if (f == formulas.end())
      formulas.push_back({e.formula, {rank}});
    else
      f->second.push_back(rank);
    if (e.truncated) truncated.push_back(rank);
  }
  for (const telemetry::LayoutTensor& t : tensors_) total_ = std::max(total_, t.offset + t.size);
  for (const Strip& s : strips_)
    for (const auto& list : s.held)
      for (const telemetry::LayoutRange& r : list) total_ = std::max(total_, r.end);

  if (!any_layout_) return;  // the status is set by takeMeasured
  QStringList names;
  for (const std::string& x : strategies) names << QString::fromStdString(x);
  status_ =
      tr("%1 on %2 ranks%3: %4 elements of %5 bytes")
          .arg(names.join(QStringLiteral(", ")))
          .arg(n)
          .arg(topology.empty()
                   ? QString()
                   : QStringLiteral(" (pp × tp × dp = %1)").arg(QString::fromStdString(topology)))
          .arg(grouped(total_))
          .arg(bytes_per_element_);
  for (const auto& [formula, with] : formulas) {
    const QString text = QString::fromStdString(formula);
    if (formulas.size() == 1)
      header_ << tr("formula: %1").arg(text);
    else if (static_cast<int>(with.size()) <= kMaxListed)
      header_ << tr("formula of %1: %2").arg(rankList(with), text);
    else
      header_
          << tr("formula of %1 ranks (rank %2 first): %3").arg(with.size()).arg(with[0]).arg(text);
  }
  if (!truncated.empty())
    header_ << tr("%1: a list longer than %2 ranges, only its first ranges are drawn")
                   .arg(rankList(truncated))
                   .arg(grouped(static_cast<int64_t>(telemetry::kMaxLayoutRanges)));
  int unknown = 0;
  for (const Strip& s : strips_) unknown += s.known ? 0 : 1;
  if (unknown > 0) header_ << tr("%1 of %2 ranks sent no layout (yet)").arg(unknown).arg(n);
}

void HoldingsView::takeMeasured(const net::RunModel& run) {
  bool stepped = false;
  for (const auto& [rank, state] : run.ranks()) {
    stepped = stepped || state.series_steps > 0;
    Strip& s = strips_[static_cast<size_t>(rank)];
    s.measured =
        std::any_of(state.memory.begin(), state.memory.end(), [](int64_t b) { return b != 0; });
    int64_t arrays = 0;
    for (const Lane& l : s.lanes) arrays += l.list == 2 ? 1 : 0;
    for (Lane& l : s.lanes) {
      const int64_t b = state.memory[static_cast<size_t>(l.category)];
      l.measured = l.list == 2 ? b / std::max<int64_t>(arrays, 1) : b;
    }
  }
  if (any_layout_) return;
  if (strips_.empty())
    status_ = tr("No run yet: start a run or open a recording");
  else if (stepped)
    status_ = tr(
        "Layout unknown: this run's ranks sent no LAYOUT event (a recording made before protocol "
        "version 4, or workers of version 3)");
  else
    status_ = tr("Waiting for the ranks' LAYOUT events (sent once a rank is set up)");
}

QString HoldingsView::bytesText(const Strip& s, const Lane& l) const {
  const QString measured =
      s.measured ? tr("%1 measured").arg(bytes(l.measured)) : tr("not measured");
  return measured + QString::fromUtf8(" · ") + tr("%1 formula").arg(bytes(l.planned));
}

QColor HoldingsView::roleColor(const QString& role) {
  // Apart from the memory palette's blue, orange and teal the lanes are drawn in.
  if (role == "send") return QColor(215, 25, 50);      // red
  if (role == "receive") return QColor(120, 40, 200);  // purple
  if (role == "read") return QColor(25, 25, 25);       // black
  return QColor(225, 0, 150);                          // write: magenta
}

void HoldingsView::setFrame(const net::ReplayFrame* frame) {
  framed_ = frame != nullptr;
  touches_.clear();
  in_frame_.clear();
  if (frame) {
    for (const net::ReplayRank& r : frame->ranks) {
      if (r.rank < 0 || r.rank >= (1 << 16)) continue;
      const auto at = static_cast<size_t>(r.rank);
      if (touches_.size() <= at) {
        touches_.resize(at + 1);
        in_frame_.resize(at + 1, false);
      }
      in_frame_[at] = true;
      for (const net::ReplayTouch& t : r.touches)
        touches_[at].push_back(
            {static_cast<int>(t.lane), QString(net::to_string(t.role)), t.ranges});
    }
  }
  QWidget::update();
}

bool HoldingsView::dimmed(int rank) const {
  if (!framed_ || rank < 0) return false;
  return static_cast<size_t>(rank) >= in_frame_.size() || !in_frame_[static_cast<size_t>(rank)];
}

std::vector<HoldingsView::DrawnHighlight> HoldingsView::drawnHighlights() const {
  ensureLayout();
  std::vector<DrawnHighlight> out;
  for (const LaneGeometry& g : lanes_) {
    const auto rank = static_cast<size_t>(g.strip);
    if (rank >= touches_.size()) continue;
    const Lane& l = strips_[rank].lanes[static_cast<size_t>(g.lane)];
    for (const Touch& t : touches_[rank]) {
      if (t.list != l.list) continue;
      DrawnHighlight h;
      h.rank = g.strip;
      h.lane = l.name;
      h.role = t.role;
      const bool upper = t.role == "send" || t.role == "read";
      const double half = std::floor(g.box.height() / 2);
      h.bar =
          QRectF(g.box.left(), upper ? g.box.top() : g.box.bottom() - half, g.box.width(), half);
      for (const telemetry::LayoutRange& r : t.ranges) {
        h.x_ranges.emplace_back(xOf(r.begin), std::max(xOf(r.end), xOf(r.begin) + 1));
        h.index_ranges.emplace_back(r.begin, r.end);
      }
      out.push_back(std::move(h));
    }
  }
  return out;
}

double HoldingsView::xOf(int64_t index) const {
  if (total_ <= 0) return axis_.left();
  return axis_.left() + static_cast<double>(index) / static_cast<double>(total_) * axis_.width();
}

void HoldingsView::ensureLayout() const {
  if (!dirty_ && layout_size_ == size()) return;
  dirty_ = false;
  layout_size_ = size();
  lanes_.clear();
  boundaries_.clear();
  strip_top_.clear();
  strip_bottom_.clear();
  axis_ = QRectF();

  const QFontMetrics fm(font());
  QFont bold = font();
  bold.setBold(true);
  const QFontMetrics bm(bold);
  line_ = fm.height();
  pitch_ = std::max(line_, 12) + 3;

  // Header: the status (bold), the formulas and notes, the legend.
  int y = kMargin;
  int widest = bm.horizontalAdvance(status_);
  y += bm.height();
  if (any_layout_) {
    for (const QString& h : header_) widest = std::max(widest, fm.horizontalAdvance(h));
    y += line_ * static_cast<int>(header_.size());
    // The legend: [colours] held  [ ] not held  | tensor boundary  [//] padding  right: bytes
    const int legend = 3 * kSwatch + 4 + fm.horizontalAdvance(tr("held")) + 2 * kGap + kSwatch + 4 +
                       fm.horizontalAdvance(tr("not held")) + 2 * kGap + 8 +
                       fm.horizontalAdvance(tr("tensor boundary")) + 2 * kGap + kSwatch + 4 +
                       fm.horizontalAdvance(tr("padding")) + 2 * kGap + kSwatch + 4 +
                       fm.horizontalAdvance(tr("pale: held in part")) + 2 * kGap +
                       fm.horizontalAdvance(tr("right: bytes measured · by the formula"));
    widest = std::max(widest, legend);
    y += line_ + 4;
  }
  header_h_ = y;

  if (!any_layout_) {
    min_width_ = widest + 2 * kMargin;
    content_height_ = y + kMargin;
    return;
  }

  // Columns: rank label | lane label | axis | padding stub | bytes.
  int rank_w = 0, lane_w = 0, bytes_w = 0;
  for (size_t r = 0; r < strips_.size(); ++r) {
    const Strip& s = strips_[r];
    rank_w = std::max(rank_w, bm.horizontalAdvance(tr("rank %1").arg(r)));
    if (s.lanes.size() >= 2) rank_w = std::max(rank_w, fm.horizontalAdvance(s.place));
    for (const Lane& l : s.lanes) {
      lane_w = std::max(lane_w, fm.horizontalAdvance(l.name));
      bytes_w = std::max(bytes_w, fm.horizontalAdvance(bytesText(s, l)));
    }
  }
  rank_x_ = kMargin;
  lane_x_ = rank_x_ + rank_w + 2 * kGap;
  const int axis_left = lane_x_ + lane_w + kGap;
  const int after_axis = kGap / 2 + kStub + kGap;  // the stub and the gap before the bytes
  min_width_ =
      std::max(widest + 2 * kMargin, axis_left + kMinAxis + after_axis + bytes_w + kMargin);
  const int axis_w = std::max(kMinAxis, width() - kMargin - bytes_w - after_axis - axis_left);
  stub_x_ = axis_left + axis_w + kGap / 2;
  bytes_x_ = axis_left + axis_w + after_axis;

  // The ruler row, then the strips.
  ruler_y_ = y;
  y += line_ + 2;
  strips_y_ = y;
  double lanes_top = -1, lanes_bottom = -1;
  const int box_h = pitch_ - 4;
  for (size_t r = 0; r < strips_.size(); ++r) {
    const Strip& s = strips_[r];
    strip_top_.push_back(y);
    y += kStripPad;
    const int rows = s.known ? std::max<int>(static_cast<int>(s.lanes.size()), 1) : 1;
    for (size_t i = 0; i < s.lanes.size(); ++i) {
      LaneGeometry g;
      g.strip = static_cast<int>(r);
      g.lane = static_cast<int>(i);
      g.box = QRectF(axis_left, y + static_cast<int>(i) * pitch_ + 2, axis_w, box_h);
      if (lanes_top < 0) lanes_top = g.box.top();
      lanes_bottom = g.box.bottom();
      lanes_.push_back(std::move(g));
    }
    y += rows * pitch_ + kStripPad;
    strip_bottom_.push_back(y);
    y += kStripGap;
  }
  content_height_ = y + kMargin;
  if (lanes_top < 0) return;
  axis_ = QRectF(axis_left, lanes_top, axis_w, lanes_bottom - lanes_top);

  // Held ranges per lane, rasterised: the share of each pixel column the rank holds, in runs of
  // columns with the same share.
  std::vector<double> cover(static_cast<size_t>(axis_w));
  for (LaneGeometry& g : lanes_) {
    const Strip& s = strips_[static_cast<size_t>(g.strip)];
    const Lane& l = s.lanes[static_cast<size_t>(g.lane)];
    std::fill(cover.begin(), cover.end(), 0.0);
    for (const telemetry::LayoutRange& rg : s.held[l.list]) {
      const double a = std::clamp(xOf(rg.begin) - axis_left, 0.0, double(axis_w));
      const double z = std::clamp(xOf(rg.end) - axis_left, 0.0, double(axis_w));
      for (int c = static_cast<int>(a); c < axis_w && c < z; ++c)
        cover[static_cast<size_t>(c)] += std::min(z, c + 1.0) - std::max(a, double(c));
    }
    for (int c = 0; c < axis_w; ++c) {
      // Whole, none, or a share in 1/16ths (at least 1/16 when anything is held).
      const double v = cover[static_cast<size_t>(c)];
      const double q = v >= 0.999 ? 1.0 : v <= 1e-9 ? 0.0 : std::max(std::round(v * 16), 1.0) / 16;
      if (!g.runs.empty() && g.runs.back().x1 == axis_left + c && g.runs.back().share == q)
        ++g.runs.back().x1;
      else
        g.runs.push_back({axis_left + c, axis_left + c + 1, q});
    }
  }
  // Tensor boundaries inside the axis, at least 2 px apart.
  for (const telemetry::LayoutTensor& t : tensors_) {
    if (t.offset <= 0 || t.offset >= total_) continue;
    const double x = xOf(t.offset);
    if (boundaries_.empty() || x - boundaries_.back() >= 2) boundaries_.push_back(x);
  }
}

QRectF HoldingsView::axisRect() const {
  ensureLayout();
  return axis_;
}

std::vector<HoldingsView::DrawnLane> HoldingsView::drawnLanes() const {
  ensureLayout();
  std::vector<DrawnLane> out;
  out.reserve(lanes_.size());
  for (const LaneGeometry& g : lanes_) {
    const Strip& s = strips_[static_cast<size_t>(g.strip)];
    const Lane& l = s.lanes[static_cast<size_t>(g.lane)];
    DrawnLane d;
    d.rank = g.strip;
    d.lane = l.name;
    d.category = l.category;
    d.rect = g.box;
    d.padding = l.padding;
    for (const telemetry::LayoutRange& r : s.held[l.list]) {
      d.x_ranges.emplace_back(xOf(r.begin), xOf(r.end));
      d.index_ranges.emplace_back(r.begin, r.end);
    }
    out.push_back(std::move(d));
  }
  return out;
}

int HoldingsView::stripAt(int y) const {
  const auto it = std::upper_bound(strip_top_.begin(), strip_top_.end(), y);
  if (it == strip_top_.begin()) return -1;
  const auto i = static_cast<size_t>(it - strip_top_.begin() - 1);
  return y < strip_bottom_[i] ? static_cast<int>(i) : -1;
}

QString HoldingsView::laneToolTip(int strip, int lane, QPoint p) const {
  const Strip& s = strips_[static_cast<size_t>(strip)];
  const Lane& l = s.lanes[static_cast<size_t>(lane)];
  const QString who = tr("rank %1 · %2").arg(strip).arg(l.name);
  if (p.x() >= stub_x_ && p.x() < stub_x_ + kStub) {
    if (l.padding <= 0) return QString();
    return tr("+%1 padding elements\n%2: held beyond its ranges (ZeRO pads the flat buffer to a "
              "multiple of the world size, FSDP every block)")
        .arg(grouped(l.padding), who);
  }
  if (p.x() >= bytes_x_) {
    const QString measured =
        s.measured ? tr("%1 bytes measured by the memory ledger").arg(grouped(l.measured))
                   : tr("no memory measured yet");
    const QString share =
        l.list == 2 ? tr(" (the optimizer state split evenly over its arrays)") : QString();
    return tr("%1\n%2%3\n%4 bytes by the planner's formula\n%5")
        .arg(who, measured, share, grouped(l.planned), s.formula);
  }
  if (p.x() < axis_.left() || p.x() > axis_.right() || total_ <= 0) return QString();
  const auto index = std::clamp<int64_t>(
      static_cast<int64_t>(
          std::floor((p.x() + 0.5 - axis_.left()) / axis_.width() * static_cast<double>(total_))),
      0, total_ - 1);
  QString tensor;
  const auto t =
      std::upper_bound(tensors_.begin(), tensors_.end(), index,
                       [](int64_t i, const telemetry::LayoutTensor& x) { return i < x.offset; });
  if (t != tensors_.begin()) {
    const telemetry::LayoutTensor& x = *(t - 1);
    if (index < x.offset + x.size)
      tensor =
          tr("%1 [%2, %3)")
              .arg(QString::fromStdString(x.name), grouped(x.offset), grouped(x.offset + x.size));
  }
  const std::vector<telemetry::LayoutRange>& held = s.held[l.list];
  const auto r = std::find_if(held.begin(), held.end(), [&](const telemetry::LayoutRange& x) {
    return index >= x.begin && index < x.end;
  });
  const QString holds = r != held.end()
                            ? tr("element %1: held here, in [%2, %3)")
                                  .arg(grouped(index), grouped(r->begin), grouped(r->end))
                            : tr("element %1: not held by rank %2").arg(grouped(index)).arg(strip);
  return (tensor.isEmpty() ? QString() : tensor + QLatin1Char('\n')) + who + QLatin1Char('\n') +
         holds;
}

QString HoldingsView::toolTipAt(QPoint p) const {
  ensureLayout();
  if (!any_layout_ || axis_.isNull()) return QString();
  if (p.y() >= ruler_y_ && p.y() < strips_y_ && p.x() >= axis_.left() && p.x() <= axis_.right()) {
    const auto index = static_cast<int64_t>((p.x() + 0.5 - axis_.left()) / axis_.width() *
                                            static_cast<double>(total_));
    for (const telemetry::LayoutTensor& t : tensors_)
      if (index >= t.offset && index < t.offset + t.size)
        return tr("%1 [%2, %3)")
            .arg(QString::fromStdString(t.name), grouped(t.offset), grouped(t.offset + t.size));
    return QString();
  }
  const int strip = stripAt(p.y());
  if (strip < 0) return QString();
  const Strip& s = strips_[static_cast<size_t>(strip)];
  if (!s.known) return tr("rank %1: layout unknown (it sent no LAYOUT event)").arg(strip);
  if (p.x() < lane_x_)
    return tr("rank %1%2\n%3")
        .arg(strip)
        .arg(s.place.isEmpty() ? QString() : QStringLiteral(" (") + s.place + QLatin1Char(')'),
             s.formula);
  const int lane = (p.y() - strip_top_[static_cast<size_t>(strip)] - kStripPad) / pitch_;
  if (lane < 0 || lane >= static_cast<int>(s.lanes.size())) return QString();
  if (p.x() < axis_.left()) return QString();
  return laneToolTip(strip, lane, p);
}

QSize HoldingsView::minimumSizeHint() const {
  ensureLayout();
  return QSize(min_width_, content_height_);
}

QSize HoldingsView::sizeHint() const {
  ensureLayout();
  return QSize(std::max(min_width_, 900), std::max(content_height_, 300));
}

bool HoldingsView::event(QEvent* event) {
  if (showToolTip(this, event, [this](QPoint at) { return toolTipAt(at); })) return true;
  return QWidget::event(event);
}

void HoldingsView::paintEvent(QPaintEvent* event) {
  ensureLayout();
  QPainter p(this);
  const QRect dirty = event->rect();
  p.fillRect(dirty, backgroundColor());
  const QColor text = palette().color(QPalette::WindowText);
  const QColor muted(100, 100, 100);
  const QFontMetrics fm(font());
  QFont bold = font();
  bold.setBold(true);
  const QFontMetrics bm(bold);
  const auto textAt = [&](int x, int y, const QString& s) {  // y: the top of its line
    p.drawText(QPoint(x, y + fm.ascent() + (line_ - fm.height()) / 2), s);
  };

  // Header.
  int y = kMargin;
  p.setPen(text);
  p.setFont(bold);
  p.drawText(QPoint(kMargin, y + bm.ascent()), status_);
  p.setFont(font());
  y += bm.height();
  if (!any_layout_) return;
  for (const QString& h : header_) {
    textAt(kMargin, y, h);
    y += line_;
  }
  {  // The legend.
    int x = kMargin;
    const int sy = y + (line_ - kSwatch) / 2;
    for (MemCategory c : {MemCategory::params, MemCategory::grads, MemCategory::optimizer_state}) {
      p.fillRect(QRect(x, sy, kSwatch, kSwatch), laneColor(c));
      x += kSwatch;
    }
    x += 4;
    textAt(x, y, tr("held"));
    x += fm.horizontalAdvance(tr("held")) + 2 * kGap;
    p.setPen(outlineColor());
    p.fillRect(QRect(x, sy, kSwatch, kSwatch), emptyColor());
    p.drawRect(QRect(x, sy, kSwatch - 1, kSwatch - 1));
    x += kSwatch + 4;
    p.setPen(text);
    textAt(x, y, tr("not held"));
    x += fm.horizontalAdvance(tr("not held")) + 2 * kGap;
    p.setPen(boundaryColor());
    p.drawLine(x + 2, sy - 1, x + 2, sy + kSwatch);
    x += 8;
    p.setPen(text);
    textAt(x, y, tr("tensor boundary"));
    x += fm.horizontalAdvance(tr("tensor boundary")) + 2 * kGap;
    p.fillRect(QRect(x, sy, kSwatch, kSwatch), QBrush(muted, Qt::BDiagPattern));
    p.setPen(muted);
    p.drawRect(QRect(x, sy, kSwatch - 1, kSwatch - 1));
    x += kSwatch + 4;
    p.setPen(text);
    textAt(x, y, tr("padding"));
    x += fm.horizontalAdvance(tr("padding")) + 2 * kGap;
    p.fillRect(QRect(x, sy, kSwatch, kSwatch), partColor(laneColor(MemCategory::params), 0.5));
    x += kSwatch + 4;
    textAt(x, y, tr("pale: held in part"));
    x += fm.horizontalAdvance(tr("pale: held in part")) + 2 * kGap;
    textAt(x, y, tr("right: bytes measured · by the formula"));
  }

  // The ruler: 0 and the total at the axis' ends, the names of the tensors wide enough for them.
  {
    std::vector<std::pair<double, double>> taken;
    const auto place = [&](double x0, const QString& s, const QColor& c) {
      const double x1 = x0 + fm.horizontalAdvance(s);
      for (const auto& [a, b] : taken)
        if (x0 < b + 6 && x1 > a - 6) return;
      taken.emplace_back(x0, x1);
      p.setPen(c);
      textAt(static_cast<int>(std::lround(x0)), ruler_y_, s);
    };
    place(axis_.left(), QStringLiteral("0"), text);
    const QString end = grouped(total_);
    place(axis_.right() - fm.horizontalAdvance(end), end, text);
    std::vector<const telemetry::LayoutTensor*> by_size;
    for (const telemetry::LayoutTensor& t : tensors_) by_size.push_back(&t);
    std::stable_sort(by_size.begin(), by_size.end(),
                     [](const auto* a, const auto* b) { return a->size > b->size; });
    for (const telemetry::LayoutTensor* t : by_size) {
      const QString name = QString::fromStdString(t->name);
      const double x0 = xOf(t->offset), x1 = xOf(t->offset + t->size);
      const int w = fm.horizontalAdvance(name);
      if (x1 - x0 < w + 6) continue;
      place((x0 + x1 - w) / 2, name, muted);
    }
  }

  // Strips in the dirty region.
  size_t g = 0;
  for (size_t r = 0; r < strips_.size(); ++r) {
    const Strip& s = strips_[r];
    const int top = strip_top_[r], bottom = strip_bottom_[r];
    const size_t first = g;
    g += s.lanes.size();
    if (bottom < dirty.top() || top > dirty.bottom()) continue;
    if (r % 2 == 1) p.fillRect(QRect(0, top, width(), bottom - top), bandColor());
    p.setFont(bold);
    p.setPen(text);
    p.drawText(QPoint(rank_x_, top + kStripPad + bm.ascent() + (pitch_ - bm.height()) / 2),
               tr("rank %1").arg(r));
    p.setFont(font());
    if (!s.known) {
      p.setPen(muted);
      textAt(lane_x_, top + kStripPad + (pitch_ - line_) / 2, tr("layout unknown"));
      continue;
    }
    if (s.lanes.size() >= 2 && !s.place.isEmpty()) {
      p.setPen(muted);
      textAt(rank_x_, top + kStripPad + pitch_ + (pitch_ - line_) / 2, s.place);
    }
    for (size_t i = 0; i < s.lanes.size(); ++i) {
      const LaneGeometry& lg = lanes_[first + i];
      const Lane& l = s.lanes[i];
      const int row = static_cast<int>(lg.box.center().y()) - line_ / 2;
      p.setPen(text);
      textAt(lane_x_, row, l.name);
      p.fillRect(lg.box, emptyColor());
      p.setPen(outlineColor());
      p.drawRect(lg.box.adjusted(0, 0, -1, -1));
      const QColor c = laneColor(l.category);
      for (const Run& run : lg.runs)
        if (run.share > 0)
          p.fillRect(QRect(run.x0, static_cast<int>(lg.box.top()), run.x1 - run.x0,
                           static_cast<int>(lg.box.height())),
                     run.share >= 1 ? c : partColor(c, run.share));
      // Tensor boundaries: light across what the rank holds, grey across the rest.
      for (double x : boundaries_) {
        const auto run = std::upper_bound(lg.runs.begin(), lg.runs.end(), static_cast<int>(x),
                                          [](int v, const Run& r) { return v < r.x0; });
        const bool inside = run != lg.runs.begin() && (run - 1)->share >= 0.5;
        p.setPen(inside ? boundaryOnHeldColor() : boundaryColor());
        p.drawLine(QLineF(x, lg.box.top(), x, lg.box.bottom()));
      }
      if (l.padding > 0) {
        const QRectF stub(stub_x_, lg.box.top(), kStub, lg.box.height());
        p.fillRect(stub, emptyColor());
        p.fillRect(stub, QBrush(c, Qt::BDiagPattern));
        p.setPen(c);
        p.drawRect(stub.adjusted(0, 0, -1, -1));
      }
      p.setPen(text);
      textAt(bytes_x_, row, bytesText(s, l));
    }
    if (dimmed(static_cast<int>(r))) p.fillRect(QRect(0, top, width(), bottom - top), dimColor());
  }
  // What the frame touches, over the lanes.
  for (const DrawnHighlight& h : drawnHighlights()) {
    if (h.bar.bottom() < dirty.top() || h.bar.top() > dirty.bottom()) continue;
    const QColor c = roleColor(h.role);
    for (const auto& [x0, x1] : h.x_ranges) {
      const QRectF bar(x0, h.bar.top(), x1 - x0, h.bar.height());
      p.fillRect(bar, c);
      p.setPen(c.darker(160));
      p.drawRect(bar.adjusted(0, 0, -1, -1));
    }
  }
}

void HoldingsView::resizeEvent(QResizeEvent* event) {
  dirty_ = true;
  QWidget::resizeEvent(event);
}

}  // namespace shardlab::gui
