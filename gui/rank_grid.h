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
// and shows its rank number when it is large enough. Hovering a rank (or setHoveredRank) outlines
// its three groups with nested rings of distinct colours: pp outermost, then dp, then tp. The sync
// view marks the cells of the group that is communicating now (a dark bar along the cell's
// bottom) and flags stragglers, silent and failed ranks with a coloured top-left corner.
//
// While a run goes, setShares() colours each cell instead by a share of the rank's step time
// (the main window gives the wait or the compute share of its last steps): lavender to dark purple
// from 0 to shareScale(), the smallest of 10%, 25%, 50% and 100% above every rank's share, so a
// 20% wait is not lost at the pale end of a 0..100% scale; a legend strip under the grid says
// what the colour means. Purple leaves the flag corners (amber, grey, red), the communication bar
// (green) and the orange tp ring distinct. A rank without a figure keeps its group colour.
//
// Painting is cheap: cell rectangles and rank labels are precomputed when the size or the topology
// changes, and paintEvent only does fillRect / drawStaticText over the ranks in the dirty region.
#pragma once

#include <QColor>
#include <QRect>
#include <QStaticText>
#include <QWidget>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/topology/topology.h"

QT_BEGIN_NAMESPACE
class QPainter;
QT_END_NAMESPACE

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
  mutable std::vector<QStaticText> labels_;
  std::vector<QColor> fills_;  // per rank: groupFillColor(tp_color)
  mutable bool show_labels_ = false;
};

}  // namespace shardlab::gui
