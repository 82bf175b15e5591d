#include "gui/rank_grid.h"
#include "engine/core/human_format.h"
#include "gui/palette_color.h"
#include "gui/tool_tip.h"
#include "net/run_model.h"

#include <QFontMetrics>
#include <QMouseEvent>
#include <QPaintEvent>
#include <QPainter>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>

namespace shardlab::gui {

namespace {

constexpr int kMargin = 4;    // around the whole grid
constexpr int kBlockGap = 4;  // between dp blocks on a line
constexpr int kLineGap = 3;   // between lines of dp blocks inside a pp band
constexpr int kBandGap = 10;  // between pp bands
constexpr int kPreferredCell = 28;
constexpr int kLegendGap = 6;    // between the grid and the legend strip
constexpr int kLegendBar = 120;  // the legend's colour bar, pixels wide

constexpr std::array<ParallelDim, 3> kDims = {ParallelDim::Tp, ParallelDim::Pp, ParallelDim::Dp};

// Light, mutually distinct fills (ColorBrewer Paired / Set3), so the saturated highlight rings,
// the communication bar and the flags stand out on every one of them.
constexpr std::array<QRgb, 12> kPalette = {0xa6cee3, 0xb2df8a, 0xfb9a99, 0xfdbf6f,
                                           0xcab2d6, 0xffff99, 0x8dd3c7, 0xbebada,
                                           0x80b1d3, 0xfdb462, 0xb3de69, 0xfccde5};

// ColorBrewer "Purples" (9 classes) without its two lightest: lightness falling monotonically,
// one hue (see the header for why purple); starting at a lavender rather than near-white keeps a
// 0% cell apart from the background.
constexpr std::array<QRgb, 7> kPurples = {0xdadaeb, 0xbcbddc, 0x9e9ac8, 0x807dba,
                                          0x6a51a3, 0x54278f, 0x3f007d};

// The share scale's tops: the smallest that holds every share is used.
constexpr std::array<double, 4> kShareScales = {0.10, 0.25, 0.50, 1.00};

double luma(const QColor& c) {
  return 0.2126 * c.redF() + 0.7152 * c.greenF() + 0.0722 * c.blueF();
}

bool hasFigure(double share) {
  return std::isfinite(share) && share >= 0;
}

QString percent(double fraction) {
  return QString::number(std::lround(100 * fraction)) + QLatin1Char('%');
}

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
      return paletteColor(telemetry::Meaning::tp_group);
    case ParallelDim::Pp:
      return paletteColor(telemetry::Meaning::pp_group);
    case ParallelDim::Dp:
      return paletteColor(telemetry::Meaning::dp_group);
  }
  return Qt::black;
}

QColor RankGrid::flagColor(Flag flag) {
  switch (flag) {
    case Flag::None:
      return QColor();
    case Flag::Straggler:
      return paletteColor(telemetry::Meaning::straggler);
    case Flag::Silent:
      return paletteColor(telemetry::Meaning::silent);
    case Flag::Failed:
      return paletteColor(telemetry::Meaning::failed);
  }
  return QColor();
}

QColor RankGrid::shareColor(double fraction) {
  const double f = std::isfinite(fraction) ? std::clamp(fraction, 0.0, 1.0) : 0.0;
  const int stops = static_cast<int>(kPurples.size()) - 1;
  const double x = f * stops;
  const int k = std::min(static_cast<int>(x), stops - 1);
  const double t = x - k;
  const QRgb a = kPurples[static_cast<size_t>(k)], b = kPurples[static_cast<size_t>(k + 1)];
  auto mix = [t](int u, int v) { return static_cast<int>(std::lround(u + (v - u) * t)); };
  return QColor(mix(qRed(a), qRed(b)), mix(qGreen(a), qGreen(b)), mix(qBlue(a), qBlue(b)));
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
  hosts_.assign(n, QString());
  notes_.assign(n, QString());
  shares_.clear();
  share_scale_ = 0;
  share_what_.clear();
  share_detail_.clear();
  figures_.assign(n, Figures{});
  text_dirty_ = true;
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
  legend_ = QRect();
  cell_ = 0;
  text_dirty_ = true;
  if (n == 0) return;

  const int pp = topo_->pp(), tp = topo_->tp(), dp = topo_->dp();
  const int W = width();
  int H = height();
  if (hasShares()) {
    // The legend takes a strip at the bottom; the cells share the rest.
    const int line = std::max(QFontMetrics(font()).height(), 12) + 4;
    legend_ = QRect(kMargin, H - kMargin - line, std::max(W - 2 * kMargin, 1), line);
    H -= line + kLegendGap;
  }
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
}

void RankGrid::layoutText() const {
  ensureLayout();
  if (!text_dirty_) return;
  text_dirty_ = false;
  const int n = world();
  lines_.assign(static_cast<size_t>(n), QStringList());
  text_top_.assign(static_cast<size_t>(n), 0);
  if (n == 0 || rects_.empty()) return;
  const int d = rects_.front().width();
  const int ring = std::clamp(d / 9, 1, 3);
  const int bar = std::max(2, d / 6);     // the communication bar along the bottom
  const int corner = std::max(3, d / 3);  // the flag corner, top left
  number_font_ = font();
  number_font_.setPixelSize(std::clamp(d / 3, 7, std::max(13, d / 9)));
  number_font_.setBold(true);
  figure_font_ = font();
  figure_font_.setPixelSize(std::clamp(d / 8, 8, 14));
  const QFontMetrics nfm(number_font_), ffm(figure_font_);
  number_height_ = nfm.height();
  figure_height_ = ffm.height();
  // Inside the three highlight rings; the number alone as it always was: when the widest one fits
  // (in width and height) every rank shows its number, centred in the cell.
  const int room = d - 6 * ring - 2;
  if (nfm.horizontalAdvance(QString::number(n - 1)) > room || nfm.height() > room) return;
  // With figures: under the number, clear of the bar, and below the flag corner when they all fit
  // there (else over the whole height, the corner drawn over the text's edge). They may run under
  // the hover rings (drawn over them while a rank is hovered): small cells keep a line more.
  const int inset = 2;
  const int width = d - 2 * inset;
  const int bottom = d - bar - 1;
  const int below_corner = corner + 1;
  for (int r = 0; r < n; ++r) {
    const auto i = static_cast<size_t>(r);
    QStringList& lines = lines_[i];
    lines << QString::number(r);
    const Figures& f = figures_[i];
    QStringList figures;
    if (f.step) figures << tr("step %1").arg(*f.step);
    if (f.memory) figures << QString::fromStdString(human_bytes(*f.memory));
    if (hasFigure(f.wait)) figures << tr("wait %1").arg(percent(f.wait));
    if (figures.isEmpty()) {
      text_top_[i] = (d - number_height_) / 2;
      continue;
    }
    // How many figure lines fit under the number in `height` pixels (in order: the first that
    // does not fit ends the list).
    auto fitting = [&](int height) {
      int k = 0, h = number_height_;
      for (const QString& line : figures) {
        if (h + figure_height_ > height || ffm.horizontalAdvance(line) > width) break;
        h += figure_height_;
        ++k;
      }
      return k;
    };
    const int k_clear = fitting(bottom - below_corner);
    const int k_full = fitting(bottom - inset);
    const bool clear = k_clear == k_full && number_height_ <= bottom - below_corner;
    const int k = clear ? k_clear : k_full;
    const int top = clear ? below_corner : inset;
    const int block = number_height_ + k * figure_height_;
    lines << figures.mid(0, k);
    text_top_[i] = top + std::max(0, (bottom - top - block) / 2);
  }
}

bool RankGrid::Figures::operator==(const Figures& o) const {
  const bool same_wait = std::isnan(wait) ? std::isnan(o.wait) : wait == o.wait;
  return step == o.step && memory == o.memory && same_wait;
}

void RankGrid::setFigures(const std::vector<Figures>& figures) {
  std::vector<Figures> next(static_cast<size_t>(world()));
  for (size_t r = 0; r < next.size() && r < figures.size(); ++r) next[r] = figures[r];
  if (next == figures_) return;
  figures_ = std::move(next);
  text_dirty_ = true;
  update();
}

void RankGrid::setFigures(const net::RunModel& run) {
  std::vector<Figures> figures(static_cast<size_t>(world()));
  for (const auto& [rank, state] : run.ranks()) {
    if (rank < 0 || rank >= world()) continue;
    Figures& f = figures[static_cast<size_t>(rank)];
    if (state.series_steps > 0) f.step = state.step;
    const int64_t memory = std::accumulate(state.memory.begin(), state.memory.end(), int64_t{0});
    if (memory > 0) f.memory = memory;
    const net::StepAccount w = run.time().window(rank);
    // Collectives whose waits the backend cannot measure (nccl, old recordings) would read as
    // "never waits": no figure instead.
    const bool unknown = w.wait == 0 && w.transfer == 0 && w.unknown > 0;
    if (w.steps > 0 && w.seconds > 0 && !unknown) f.wait = w.share(w.wait);
  }
  setFigures(figures);
}

RankGrid::Figures RankGrid::rankFigures(int rank) const {
  if (rank < 0 || rank >= world()) return {};
  return figures_[static_cast<size_t>(rank)];
}

QStringList RankGrid::cellLines(int rank) const {
  layoutText();
  if (rank < 0 || rank >= static_cast<int>(lines_.size())) return {};
  return lines_[static_cast<size_t>(rank)];
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
  const QString& host = hosts_[static_cast<size_t>(rank)];
  if (!host.isEmpty()) text += tr(" on %1").arg(host);
  static const char* const kNames[] = {"", "straggler", "silent", "failed"};
  const Flag f = flags_[static_cast<size_t>(rank)];
  if (f != Flag::None) {
    text += QStringLiteral("\n") + tr(kNames[static_cast<int>(f)]);
    const QString& why = reasons_[static_cast<size_t>(rank)];
    if (!why.isEmpty()) text += QStringLiteral(": ") + why;
  }
  const double share = rankShare(rank);
  if (hasFigure(share)) {
    text += QStringLiteral("\n") + tr("%1 %2").arg(share_what_, percent(share));
    if (!share_detail_.isEmpty()) text += QLatin1Char(' ') + share_detail_;
  }
  const QString& note = notes_[static_cast<size_t>(rank)];
  if (!note.isEmpty()) text += QStringLiteral("\n") + note;
  return text;
}

void RankGrid::setRankHost(int rank, const QString& host) {
  if (rank < 0 || rank >= world()) return;
  hosts_[static_cast<size_t>(rank)] = host;  // shows on the next tooltip
}

void RankGrid::setRankNote(int rank, const QString& note) {
  if (rank < 0 || rank >= world()) return;
  notes_[static_cast<size_t>(rank)] = note;  // shows on the next tooltip: nothing to repaint
}

QString RankGrid::rankNote(int rank) const {
  if (rank < 0 || rank >= world()) return {};
  return notes_[static_cast<size_t>(rank)];
}

void RankGrid::setShares(const std::vector<double>& shares, const QString& what,
                         const QString& detail) {
  std::vector<double> next;
  double top = 0;
  if (!shares.empty() && world() > 0) {
    next.assign(static_cast<size_t>(world()), std::numeric_limits<double>::quiet_NaN());
    for (size_t r = 0; r < next.size() && r < shares.size(); ++r) {
      next[r] = shares[r];
      if (hasFigure(shares[r])) top = std::max(top, shares[r]);
    }
  }
  double scale = next.empty() ? 0.0 : kShareScales.back();
  for (double s : kShareScales)
    if (!next.empty() && top <= s) {
      scale = s;
      break;
    }
  // NaN != NaN: compare figure by figure so an unchanged set of "no figure" does not repaint.
  auto same = [](const std::vector<double>& a, const std::vector<double>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i] != b[i] && (hasFigure(a[i]) || hasFigure(b[i]))) return false;
    return true;
  };
  if (same(next, shares_) && scale == share_scale_ && what == share_what_ &&
      detail == share_detail_)
    return;
  if (next.empty() != shares_.empty()) {
    layout_dirty_ = true;  // the legend strip comes or goes
    updateGeometry();
  }
  shares_ = std::move(next);
  share_scale_ = scale;
  share_what_ = what;
  share_detail_ = detail;
  update();
}

double RankGrid::rankShare(int rank) const {
  if (rank < 0 || static_cast<size_t>(rank) >= shares_.size())
    return std::numeric_limits<double>::quiet_NaN();
  return shares_[static_cast<size_t>(rank)];
}

QColor RankGrid::cellFill(int rank) const {
  if (rank < 0 || rank >= world()) return QColor();
  const double share = rankShare(rank);
  if (hasFigure(share) && share_scale_ > 0) return shareColor(share / share_scale_);
  return fills_[static_cast<size_t>(rank)];
}

QRect RankGrid::legendRect() const {
  ensureLayout();
  return legend_;
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
  int h =
      2 * kMargin + pp * (lines * kPreferredCell + (lines - 1) * kLineGap) + (pp - 1) * kBandGap;
  if (hasShares()) h += std::max(QFontMetrics(font()).height(), 12) + 4 + kLegendGap;
  return QSize(std::clamp(w, 160, 1200), std::clamp(h, 100, 900));
}

void RankGrid::paintEvent(QPaintEvent* event) {
  layoutText();
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
  const QColor dark_text(30, 30, 30), light_text(255, 255, 255);

  for (size_t r = 0; r < rects_.size(); ++r) {
    const QRect& c = rects_[r];
    if (!c.intersects(dirty)) continue;
    const QColor fill = cellFill(static_cast<int>(r));
    p.fillRect(c, fill);
    const uint8_t m = marks_[r];
    if (m & kComm) p.fillRect(QRect(c.left(), c.bottom() - bar + 1, c.width(), bar), comm_c);
    if (!lines_[r].isEmpty()) {
      p.setPen(luma(fill) < 0.45 ? light_text : dark_text);  // readable on the dark purples
      const QStringList& lines = lines_[r];
      int y = c.top() + text_top_[r];
      p.setFont(number_font_);
      p.drawText(QRect(c.left(), y, c.width(), number_height_), Qt::AlignHCenter | Qt::AlignTop,
                 lines.front());
      y += number_height_;
      if (lines.size() > 1) p.setFont(figure_font_);
      for (qsizetype i = 1; i < lines.size(); ++i, y += figure_height_)
        p.drawText(QRect(c.left(), y, c.width(), figure_height_), Qt::AlignHCenter | Qt::AlignTop,
                   lines[i]);
    }
    // Nested rings: pp outermost, dp inside it, tp innermost.
    if (m & kPp) fillRing(p, c, 0, ring, pp_c);
    if (m & kDp) fillRing(p, c, ring, ring, dp_c);
    if (m & kTp) fillRing(p, c, 2 * ring, ring, tp_c);
    if (flags_[r] != Flag::None) {
      p.fillRect(QRect(c.left(), c.top(), corner, corner), flagColor(flags_[r]));
      // A white edge keeps the corner apart from a share colour of similar lightness.
      if (hasShares() && corner >= 4) {
        p.fillRect(QRect(c.left() + corner, c.top(), 1, corner + 1), Qt::white);
        p.fillRect(QRect(c.left(), c.top() + corner, corner, 1), Qt::white);
      }
    }
  }
  if (!legend_.isNull() && legend_.intersects(dirty)) paintLegend(p);
}

void RankGrid::paintLegend(QPainter& p) const {
  // "wait  0% [light .. dark] 25%  of step time, last 20 steps"
  const QFontMetrics fm(font());
  p.setFont(font());
  p.setPen(palette().color(QPalette::WindowText));
  const int mid = legend_.center().y();
  const int text_y = mid - fm.height() / 2;
  int x = legend_.left();
  auto text = [&](const QString& t) {
    p.drawText(QRect(x, text_y, fm.horizontalAdvance(t) + 1, fm.height()), Qt::AlignVCenter, t);
    x += fm.horizontalAdvance(t) + kLegendGap;
  };
  text(share_what_);
  text(QStringLiteral("0%"));
  const QRect bar(x, mid - 5, std::min(kLegendBar, std::max(legend_.right() - x - 40, 10)), 10);
  for (int i = 0; i < bar.width(); ++i)
    p.fillRect(QRect(bar.left() + i, bar.top(), 1, bar.height()),
               shareColor(bar.width() > 1 ? i / static_cast<double>(bar.width() - 1) : 1.0));
  x = bar.right() + 1 + kLegendGap;
  text(percent(share_scale_));
  if (!share_detail_.isEmpty()) text(share_detail_);
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
