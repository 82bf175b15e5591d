// RankGrid: draws a job's 3D topology, one cell per rank, and shows which group is talking.
//
// Layout (all positions come from Topology::coord(); the grid holds no rank arithmetic itself):
//
//   +-- pp band 0 ------------------------------------------------+
//   | [tp0 tp1 .. tp(T-1)]  [tp0 tp1 ..]  ...  [tp0 tp1 ..]        |   dp blocks 0 .. K-1
//   | [tp0 tp1 .. tp(T-1)]  ...                                   |   dp blocks K .. 2K-1
//   +-- pp band 1 ------------------------------------------------+
//   | ...                                                         |
//
// - each pipeline stage (pp coordinate) is a horizontal row band, stage 0 at the top;
// - inside a band, each data-parallel replica (dp coordinate) is a block of tp cells side by side
//   (same top, x increasing with the tp coordinate), so a tp group is one contiguous strip;
// - the dp blocks of a band run left to right, K per line, wrapping onto further lines of the same
//   band; K is chosen on every resize to make the (square) cells as large as the widget allows.
//
// A cell is filled with its tp group's colour (a fixed palette cycled over Topology::tp_color)
// and shows its rank number when it is large enough. During a run (setFigures) it shows under the
// number, as far as they fit, the rank's step ("step 143"), its memory now (all categories,
// engine/core/human_format.h: "9.5 MiB") and its wait share of its recent steps ("wait 30%"):
// lines that do not fit the cell's width or height are left out from the last up, so small cells
// (64 ranks in a small window) keep the number and the first figures, tiny ones nothing. The text
// keeps clear of the communication bar and, when it can, of the flag corner. Hovering a rank (or
// setHoveredRank) outlines its three groups with nested rings of distinct colours: pp outermost,
// then dp, then tp. The sync view marks the cells of the group that is communicating now (a dark
// bar along the cell's bottom) and flags stragglers, silent and failed ranks with a coloured
// top-left corner.
//
// While a run goes, setShares() colours each cell instead by a share of the rank's step time
// (the main window gives the wait or the compute share of its last steps): lavender to dark purple
// from 0 to shareScale(), the smallest of 10%, 25%, 50% and 100% above every rank's share, so a
// 20% wait is not lost at the pale end of a 0..100% scale; a legend strip under the grid says
// what the colour means. Purple leaves the flag corners (amber, grey, red), the communication bar
// (green) and the orange tp ring distinct. A rank without a figure keeps its group colour.
//
// Painting is cheap: cell rectangles are precomputed when the size or the topology changes, the
// cells' lines when the size or the figures change, and paintEvent only does fillRect / drawText
// over the ranks in the dirty region.
#pragma once

#include <QColor>
#include <QFont>
#include <QRect>
#include <QStringList>
#include <QWidget>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "engine/topology/topology.h"

QT_BEGIN_NAMESPACE
class QPainter;
QT_END_NAMESPACE

namespace shardlab::net {
class RunModel;
}

namespace shardlab::gui {

class RankGrid : public QWidget {
  Q_OBJECT
 public:
  enum class Flag : uint8_t { None, Straggler, Silent, Failed };

  // Colours used for drawing, public so tests and legends can refer to them. The group rings' and
  // the flags' come from engine/telemetry/palette.h, as on the web page.
  static QColor backgroundColor() { return QColor(250, 250, 250); }
  static QColor highlightColor(ParallelDim dim);
  static QColor flagColor(Flag flag);
  static QColor communicatingColor() { return QColor(20, 110, 40); }
  // The fill of a tp group of colour `color` (Topology::tp_color): a palette cycled over colours.
  static QColor groupFillColor(int color);

  explicit RankGrid(QWidget* parent = nullptr);

  // Replaces the topology; clears the hover, the communicating group and the flags.
  void setTopology(const Topology& topo);
  bool hasTopology() const { return topo_.has_value(); }
  const Topology& topology() const { return *topo_; }  // only when hasTopology()
  int world() const { return topo_ ? topo_->world() : 0; }

  // The rank whose cell contains `p` (widget coordinates), or -1 for gaps and margins.
  int rankAt(QPoint p) const;
  // The rank's cell in widget coordinates; empty for a rank out of range.
  QRect cellRect(int rank) const;
  // Edge of the (square) cells in pixels at the current size.
  int cellSize() const;

  // -1 when no rank is hovered.
  int hoveredRank() const { return hovered_; }
  // For tests and keyboard navigation; -1 clears. Emits rankHovered when it changes.
  void setHoveredRank(int rank);
  // The hovered rank's group along `dim`, in Topology's group order; empty when none is hovered.
  std::vector<int> highlighted(ParallelDim dim) const;
  bool isHighlighted(ParallelDim dim, int rank) const;

  // Sync view. `group_name` is a Topology group name ("tp[3]", "pp[0]", "dp[1]") or "world"; an
  // empty or unknown name clears the marker. Returns whether the name resolved to a group.
  bool setCommunicating(const std::string& group_name);
  const std::string& communicating() const { return communicating_name_; }
  bool isCommunicating(int rank) const;

  // Out-of-range ranks are ignored; `reason` (why it failed, how long it has been silent) shows
  // in the cell's tooltip. Repaints only when something changed.
  void setRankFlag(int rank, Flag flag, const QString& reason = {});
  Flag rankFlag(int rank) const;
  QString rankReason(int rank) const;
  // The host the rank runs on (its HELLO's), shown in its tooltip ("... on h2"); "" unknown.
  void setRankHost(int rank, const QString& host);
  // Extra lines for the rank's tooltip (the run's diagnosis where it concerns the rank).
  void setRankNote(int rank, const QString& note);
  QString rankNote(int rank) const;
  // The tooltip of a rank's cell: its coordinates and host, its flag with the reason, its share
  // (when shares are shown) and its note.
  QString rankToolTip(int rank) const;
  void clearFlags();

  // Colours the cells by `shares` (one per rank, a fraction of step time; NaN or negative: no
  // figure) and shows `what` in the legend and tooltips ("wait", "compute"), with `detail` after
  // the legend's scale ("of step time, last 20 steps"). An empty vector goes back to the group
  // colours. Repaints only when something changed.
  void setShares(const std::vector<double>& shares, const QString& what = {},
                 const QString& detail = {});
  bool hasShares() const { return !shares_.empty(); }
  double rankShare(int rank) const;  // NaN when none
  // The top of the colour scale (see above); 0 without shares.
  double shareScale() const { return share_scale_; }
  QString shareLabel() const { return share_what_; }
  // The colour of `fraction` of the scale (clamped to [0, 1]).
  static QColor shareColor(double fraction);
  // What a rank's cell is filled with: its share's colour, or its group's colour.
  QColor cellFill(int rank) const;
  // The legend strip (widget coordinates); empty without shares.
  QRect legendRect() const;

  // What a cell shows under its rank number during a run. Unknown: nullopt, NaN.
  struct Figures {
    std::optional<int64_t> step;                             // the rank's last step
    std::optional<int64_t> memory;                           // bytes held now, all categories
    double wait = std::numeric_limits<double>::quiet_NaN();  // share of its recent step time
    bool operator==(const Figures& o) const;
  };
  // One per rank (missing ranks: none); repaints only when something changed.
  void setFigures(const std::vector<Figures>& figures);
  // From the run model: each rank's step (once it reported one), its current memory summed over
  // the categories (once it reported any), and the wait share of its window of recent steps
  // (net::TimeAccounting::window, as RunModel::table()'s WAIT%; none while the backend cannot
  // measure its waits).
  void setFigures(const net::RunModel& run);
  Figures rankFigures(int rank) const;
  // The lines drawn in the rank's cell at the current size: the rank number, then its figures as
  // far as they fit; empty when not even the number fits.
  QStringList cellLines(int rank) const;

  QSize sizeHint() const override;
  QSize minimumSizeHint() const override { return QSize(120, 80); }

 signals:
  // The hovered rank changed (-1: none).
  void rankHovered(int rank);

 protected:
  void paintEvent(QPaintEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;
  void mouseMoveEvent(QMouseEvent* event) override;
  void leaveEvent(QEvent* event) override;
  bool event(QEvent* event) override;  // tooltips

 private:
  enum Mark : uint8_t { kTp = 1, kPp = 2, kDp = 4, kComm = 8 };

  void ensureLayout() const;  // recomputes the cell rects when the size or topology changed
  void layoutText() const;    // the cells' lines and fonts, from the cell size and the figures
  void paintLegend(QPainter& p) const;
  void updateRanks(const std::vector<int>& ranks);

  std::optional<Topology> topo_;
  int hovered_ = -1;
  std::string communicating_name_;
  std::vector<uint8_t> marks_;    // per rank: Mark bits
  std::vector<Flag> flags_;       // per rank
  std::vector<QString> reasons_;  // per rank
  std::vector<QString> hosts_;    // per rank
  std::vector<QString> notes_;    // per rank
  std::vector<double> shares_;    // per rank, empty: group colours
  double share_scale_ = 0;
  QString share_what_, share_detail_;

  // Layout cache (mutable: rebuilt lazily from const accessors when the size changed).
  mutable QSize layout_size_;
  mutable bool layout_dirty_ = true;
  mutable int cell_ = 0;
  mutable std::vector<QRect> rects_;
  mutable QRect legend_;
  std::vector<QColor> fills_;     // per rank: groupFillColor(tp_color)
  std::vector<Figures> figures_;  // per rank
  // The cells' text (rebuilt lazily when the size or the figures changed): per rank its lines,
  // the first in number_font_, the others in figure_font_, and the top of the first line
  // relative to the cell's top.
  mutable bool text_dirty_ = true;
  mutable std::vector<QStringList> lines_;
  mutable std::vector<int> text_top_;
  mutable QFont number_font_, figure_font_;
  mutable int number_height_ = 0, figure_height_ = 0;
};

}  // namespace shardlab::gui
