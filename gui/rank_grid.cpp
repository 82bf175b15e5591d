#include "gui/rank_grid.h"
#include "gui/tool_tip.h"

#include <QFontMetrics>
#include <QMouseEvent>
#include <QPaintEvent>
#include <QPainter>

#include <algorithm>
#include <array>

namespace shardlab::gui {

namespace {

constexpr int kMargin = 4;    // around the whole grid
constexpr int kBlockGap = 4;  // between dp blocks on a line
constexpr int kLineGap = 3;   // between lines of dp blocks inside a pp band
constexpr int kBandGap = 10;  // between pp bands
constexpr int kPreferredCell = 28;

constexpr std::array<ParallelDim, 3> kDims = {ParallelDim::Tp, ParallelDim::Pp, ParallelDim::Dp};

// Light, mutually distinct fills (ColorBrewer Paired / Set3), so the saturated highlight rings,
// the communication bar and the flags stand out on every one of them.
constexpr std::array<QRgb, 12> kPalette = {0xa6cee3, 0xb2df8a, 0xfb9a99, 0xfdbf6f,
                                           0xcab2d6, 0xffff99, 0x8dd3c7, 0xbebada,
                                           0x80b1d3, 0xfdb462, 0xb3de69, 0xfccde5};

int ceilDiv(int a, int b) {
  return (a + b - 1) / b;
}

// Draws a ring of width `w` just inside `r`, inset by `inset`, with four fillRects (no pens, no
// antialiasing: cheap and pixel-exact).
void fillRing(QPainter& p, const QRect& r, int inset, int w, const QColor& c) {
  const QRect o = r.adjusted(inset, inset, -inset, -inset);
  if (o.width() <= 0 || o.height() <= 0) return;
  const int ww = std::min(w, o.width()), wh = std::min(w, o.height());
  p.fillRect(QRect(o.left(), o.top(), o.width(), wh), c);
  p.fillRect(QRect(o.left(), o.bottom() - wh + 1, o.width(), wh), c);
  p.fillRect(QRect(o.left(), o.top(), ww, o.height()), c);
  p.fillRect(QRect(o.right() - ww + 1, o.top(), ww, o.height()), c);
}

uint8_t markOf(ParallelDim dim) {
  switch (dim) {
    case ParallelDim::Tp:
      return 1;
    case ParallelDim::Pp:
      return 2;
    case ParallelDim::Dp:
      return 4;
  }
  return 0;
}

}  // namespace

QColor RankGrid::highlightColor(ParallelDim dim) {
  switch (dim) {
    case ParallelDim::Tp:
      return QColor(255, 110, 0);  // orange
    case ParallelDim::Pp:
      return QColor(200, 0, 200);  // magenta
    case ParallelDim::Dp:
      return QColor(0, 80, 255);  // blue
  }
  return Qt::black;
}

QColor RankGrid::flagColor(Flag flag) {
  switch (flag) {
    case Flag::None:
      return QColor();
    case Flag::Straggler:
      return QColor(240, 175, 0);
    case Flag::Silent:
      return QColor(100, 100, 100);
    case Flag::Failed:
      return QColor(220, 20, 20);
  }
  return QColor();
}

QColor RankGrid::groupFillColor(int color) {
  const int n = static_cast<int>(kPalette.size());
  return QColor(kPalette[static_cast<size_t>(((color % n) + n) % n)]);
}

RankGrid::RankGrid(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
  setAttribute(Qt::WA_OpaquePaintEvent);  // paintEvent fills its whole dirty region
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Expanding);
}

void RankGrid::setTopology(const Topology& topo) {
  const int old_hover = hovered_;
  topo_ = topo;
  const auto n = static_cast<size_t>(topo.world());
  hovered_ = -1;
  communicating_name_.clear();
  marks_.assign(n, 0);
  flags_.assign(n, Flag::None);
  reasons_.assign(n, QString());
  fills_.resize(n);
  for (int r = 0; r < topo.world(); ++r)
    fills_[static_cast<size_t>(r)] = groupFillColor(topo.tp_color(r));
  layout_dirty_ = true;
  updateGeometry();
  update();
  if (old_hover != -1) emit rankHovered(-1);
}

void RankGrid::ensureLayout() const {
  if (!layout_dirty_ && layout_size_ == size()) return;
  layout_dirty_ = false;
  layout_size_ = size();
  const int n = world();
  rects_.assign(static_cast<size_t>(n), QRect());
  labels_.assign(static_cast<size_t>(n), QStaticText());
  cell_ = 0;
  show_labels_ = false;
  if (n == 0) return;

  const int pp = topo_->pp(), tp = topo_->tp(), dp = topo_->dp();
  const int W = width(), H = height();
  // Blocks per line: the k that gives the largest square cells.
  int best_s = -1, k = 1;
  for (int kk = 1; kk <= dp; ++kk) {
    const int lines = ceilDiv(dp, kk);
    const int sw = (W - 2 * kMargin - (kk - 1) * kBlockGap) / (kk * tp);
    const int sh =
        (H - 2 * kMargin - (pp - 1) * kBandGap - pp * (lines - 1) * kLineGap) / (pp * lines);
    const int s = std::min(sw, sh);
    if (s > best_s) best_s = s, k = kk;
  }
  const int s = std::max(best_s, 1);
  cell_ = s;
  const int lines = ceilDiv(dp, k);
  const int block_w = tp * s;
  const int band_h = lines * s + (lines - 1) * kLineGap;
  const int total_w = k * block_w + (k - 1) * kBlockGap;
  const int total_h = pp * band_h + (pp - 1) * kBandGap;
  const int ox = std::max(kMargin, (W - total_w) / 2);
  const int oy = std::max(kMargin, (H - total_h) / 2);
  const int gap = s >= 6 ? 2 : s >= 3 ? 1 : 0;  // space between cells, so rings stay apart
  for (int r = 0; r < n; ++r) {
    const Coord c = topo_->coord(r);
    const int x = ox + (c.dp % k) * (block_w + kBlockGap) + c.tp * s;
    const int y = oy + c.pp * (band_h + kBandGap) + (c.dp / k) * (s + kLineGap);
    rects_[static_cast<size_t>(r)] = QRect(x, y, s - gap, s - gap);
  }

  // Rank numbers, when the widest one fits inside the highlight rings.
  const int d = s - gap;
  const int ring = std::clamp(d / 9, 1, 3);
  QFont f = font();
  f.setPixelSize(std::clamp(d / 3, 7, 13));
  const QFontMetrics fm(f);
  const int room = d - 6 * ring - 2;
  if (fm.horizontalAdvance(QString::number(n - 1)) <= room && fm.height() <= room) {
    show_labels_ = true;
    for (int r = 0; r < n; ++r) {
      QStaticText& t = labels_[static_cast<size_t>(r)];
      t.setText(QString::number(r));
      t.setTextFormat(Qt::PlainText);
      t.prepare(QTransform(), f);
    }
  }
}

int RankGrid::rankAt(QPoint p) const {
  ensureLayout();
  for (size_t r = 0; r < rects_.size(); ++r)
    if (rects_[r].contains(p)) return static_cast<int>(r);
  return -1;
}

QRect RankGrid::cellRect(int rank) const {
  ensureLayout();
  if (rank < 0 || rank >= static_cast<int>(rects_.size())) return QRect();
  return rects_[static_cast<size_t>(rank)];
}

int RankGrid::cellSize() const {
  ensureLayout();
  return cell_;
}

void RankGrid::updateRanks(const std::vector<int>& ranks) {
  for (int r : ranks) update(cellRect(r));
}

void RankGrid::setHoveredRank(int rank) {
  if (rank < 0 || rank >= world()) rank = -1;
  if (rank == hovered_) return;
  constexpr uint8_t kGroups = kTp | kPp | kDp;
  for (ParallelDim dim : kDims) {
    const std::vector<int> old = highlighted(dim);
    for (int r : old) marks_[static_cast<size_t>(r)] &= static_cast<uint8_t>(~kGroups);
    updateRanks(old);
  }
  hovered_ = rank;
  for (ParallelDim dim : kDims) {
    const std::vector<int> now = highlighted(dim);
    for (int r : now) marks_[static_cast<size_t>(r)] |= markOf(dim);
    updateRanks(now);
  }
  emit rankHovered(hovered_);
}

std::vector<int> RankGrid::highlighted(ParallelDim dim) const {
  if (hovered_ < 0 || !topo_) return {};
  return topo_->group(dim, hovered_);
}

bool RankGrid::isHighlighted(ParallelDim dim, int rank) const {
  return rank >= 0 && rank < world() && (marks_[static_cast<size_t>(rank)] & markOf(dim));
}

bool RankGrid::setCommunicating(const std::string& group_name) {
  for (auto& m : marks_) m &= static_cast<uint8_t>(~kComm);
  communicating_name_.clear();
  bool found = false;
  const int n = world();
  if (group_name == "world") {
    for (auto& m : marks_) m |= kComm;
    found = n > 0;
  } else if (!group_name.empty()) {
    // Resolve the name through Topology itself: the ranks whose group is called `group_name`.
    for (ParallelDim dim : kDims) {
      if (group_name.rfind(dim_name(dim), 0) != 0) continue;
      for (int r = 0; r < n; ++r) {
        if (topo_->group_name(dim, r) == group_name) {
          marks_[static_cast<size_t>(r)] |= kComm;
          found = true;
        }
      }
    }
  }
  if (found) communicating_name_ = group_name;
  update();
  return found;
}

bool RankGrid::isCommunicating(int rank) const {
  return rank >= 0 && rank < world() && (marks_[static_cast<size_t>(rank)] & kComm);
}

void RankGrid::setRankFlag(int rank, Flag flag, const QString& reason) {
  if (rank < 0 || rank >= world()) return;
  const auto i = static_cast<size_t>(rank);
  reasons_[i] = reason;
  if (flags_[i] == flag) return;
  flags_[i] = flag;
  update(cellRect(rank));
}

QString RankGrid::rankReason(int rank) const {
  if (rank < 0 || rank >= world()) return {};
  return reasons_[static_cast<size_t>(rank)];
}

QString RankGrid::rankToolTip(int rank) const {
  if (rank < 0 || rank >= world()) return {};
  const Coord c = topo_->coord(rank);
  QString text = tr("rank %1 (pp %2, tp %3, dp %4)").arg(rank).arg(c.pp).arg(c.tp).arg(c.dp);
  static const char* const kNames[] = {"", "straggler", "silent", "failed"};
  const Flag f = flags_[static_cast<size_t>(rank)];
  if (f != Flag::None) {
    text += QStringLiteral("\n") + tr(kNames[static_cast<int>(f)]);
    const QString& why = reasons_[static_cast<size_t>(rank)];
    if (!why.isEmpty()) text += QStringLiteral(": ") + why;
  }
  return text;
}

RankGrid::Flag RankGrid::rankFlag(int rank) const {
  if (rank < 0 || rank >= world()) return Flag::None;
  return flags_[static_cast<size_t>(rank)];
}

void RankGrid::clearFlags() {
  std::fill(flags_.begin(), flags_.end(), Flag::None);
  std::fill(reasons_.begin(), reasons_.end(), QString());
  update();
}

QSize RankGrid::sizeHint() const {
  if (!topo_) return QSize(400, 240);
  const int pp = topo_->pp(), tp = topo_->tp(), dp = topo_->dp();
  const int k =
      std::clamp((1200 - 2 * kMargin + kBlockGap) / (tp * kPreferredCell + kBlockGap), 1, dp);
  const int lines = ceilDiv(dp, k);
  const int w = 2 * kMargin + k * tp * kPreferredCell + (k - 1) * kBlockGap;
  const int h =
      2 * kMargin + pp * (lines * kPreferredCell + (lines - 1) * kLineGap) + (pp - 1) * kBandGap;
  return QSize(std::clamp(w, 160, 1200), std::clamp(h, 100, 900));
}

void RankGrid::paintEvent(QPaintEvent* event) {
  ensureLayout();
  QPainter p(this);
  const QRect dirty = event->rect();
  p.fillRect(dirty, backgroundColor());
  if (rects_.empty()) return;

  const int d = rects_.front().width();
  const int ring = std::clamp(d / 9, 1, 3);
  const int bar = std::max(2, d / 6);
  const int corner = std::max(3, d / 3);
  const QColor tp_c = highlightColor(ParallelDim::Tp), pp_c = highlightColor(ParallelDim::Pp),
               dp_c = highlightColor(ParallelDim::Dp), comm_c = communicatingColor();
  if (show_labels_) {
    QFont f = font();
    f.setPixelSize(std::clamp(d / 3, 7, 13));
    p.setFont(f);
    p.setPen(QColor(30, 30, 30));
  }

  for (size_t r = 0; r < rects_.size(); ++r) {
    const QRect& c = rects_[r];
    if (!c.intersects(dirty)) continue;
    p.fillRect(c, fills_[r]);
    const uint8_t m = marks_[r];
    if (m & kComm) p.fillRect(QRect(c.left(), c.bottom() - bar + 1, c.width(), bar), comm_c);
    if (show_labels_) {
      const QStaticText& t = labels_[r];
      const QSizeF ts = t.size();
      p.drawStaticText(QPointF(c.left() + (c.width() - ts.width()) / 2.0,
                               c.top() + (c.height() - ts.height()) / 2.0),
                       t);
    }
    // Nested rings: pp outermost, dp inside it, tp innermost.
    if (m & kPp) fillRing(p, c, 0, ring, pp_c);
    if (m & kDp) fillRing(p, c, ring, ring, dp_c);
    if (m & kTp) fillRing(p, c, 2 * ring, ring, tp_c);
    if (flags_[r] != Flag::None)
      p.fillRect(QRect(c.left(), c.top(), corner, corner), flagColor(flags_[r]));
  }
}

void RankGrid::resizeEvent(QResizeEvent* event) {
  layout_dirty_ = true;
  QWidget::resizeEvent(event);
}

void RankGrid::mouseMoveEvent(QMouseEvent* event) {
  setHoveredRank(rankAt(event->position().toPoint()));
  QWidget::mouseMoveEvent(event);
}

bool RankGrid::event(QEvent* event) {
  if (showToolTip(this, event, [this](QPoint at) { return rankToolTip(rankAt(at)); })) return true;
  return QWidget::event(event);
}

void RankGrid::leaveEvent(QEvent* event) {
  setHoveredRank(-1);
  QWidget::leaveEvent(event);
}

}  // namespace shardlab::gui
