// HoldingsView: who holds what, one strip per rank over the whole model's flat index range, from
// the ranks' LAYOUT events (RankState::layout, engine/telemetry/events.h; resources/docs/
// teaching.md says what they mean).
//
//   zero2 on 4 ranks (pp × tp × dp = 1 × 1 × 4): 1,124 elements of 4 bytes        header
//   formula: zero2: 4*Psi' + 4*Psi'/N + 8*Psi'/N
//   [#] held  [ ] not held  | tensor boundary  [//] padding  right: bytes ...         legend
//                      0     wte                        1,124                          ruler
//   rank 0  params     |#############################|  4.4 KiB measured · 4.4 KiB formula
//   pp0 tp0 grads      |#######|        | |  |       |  1.1 KiB measured · 1.1 KiB formula
//           exp_avg    |#######|        | |  |       |  ...
//           exp_avg_sq |#######|        | |  |       |
//   rank 1  ...
//
// - The axis is [0, total) of the full model's flat layout (LayoutEvent::tensors), shared by every
//   strip. A strip has a lane for params, one for grads and one per optimizer state array (each
//   drawing the optimizer_state ranges). A held range [b, e) is filled at its true offset in the
//   memory category's colour (gui/palette_color.h); the rest of the lane is outlined and empty.
//   A pixel column held only in part (ranges finer than a pixel) is a paler shade of the colour,
//   so a sliver of a few elements still shows. Tensor boundaries are thin vertical lines across
//   each lane (light over the held ranges, grey elsewhere).
// - A lane whose padding is > 0 has a small hatched stub after the axis end ("+N padding
//   elements" in its tooltip).
// - Right of each lane: the bytes the rank measured (RankState::memory for the lane's category;
//   the optimizer state split evenly over its state arrays) beside the planner's formula's bytes
//   (LayoutEvent::planned).
// - A rank with no layout (yet) has one line, "layout unknown"; when no rank has one the whole view
//   says so instead (a recording made before protocol version 4, or workers of version 3).
// - Strips have a fixed pitch (one text line per lane): at 64 ranks the view is taller than the
//   window, and the main window puts it in a QScrollArea. minimumSizeHint() is the height of every
//   strip and a width at which no text overlaps or is cut.
// - Hovering names the tensor under the cursor with its range [offset, offset + size), the rank,
//   the lane and whether the rank holds that element; over a padding stub the padding; over the
//   bytes the exact figures.
//
// - One step, phase by phase: setFrame() lights up what a frame of a step's replay touches
//   (net/step_replay.h; gui/step_scrubber.h picks it): on each rank in the frame, on the touched
//   lane (every state-array lane for the optimizer state), a bar over each touched range at its
//   offset, over the upper half of the lane for what it sends or reads, over the lower half for
//   what it receives or writes, in the role's colour (roleColor()) with a dark edge; the strips
//   of ranks not in the frame are dimmed.
//
// update(run) copies the layouts only when RunModel::layouts() (or the model) changed; the
// measured bytes are taken on every call. Geometry is computed lazily when the size or the data
// changed (held ranges rasterised into runs of pixel columns); paintEvent draws only the strips in
// the dirty region.
#pragma once

#include <QColor>
#include <QPoint>
#include <QRectF>
#include <QString>
#include <QWidget>

#include <cstdint>
#include <utility>
#include <vector>

#include "engine/core/memory.h"
#include "engine/telemetry/events.h"

namespace shardlab::net {
class RunModel;
struct ReplayFrame;
}  // namespace shardlab::net

namespace shardlab::gui {

class HoldingsView : public QWidget {
  Q_OBJECT
 public:
  // What was drawn for one lane at the current size (widget coordinates).
  struct DrawnLane {
    int rank = 0;
    QString lane;  // "params", "grads", or a state array's name ("exp_avg", "exp_avg_sq")
    MemCategory category = MemCategory::params;
    QRectF rect;  // the lane's box on the axis (the axis' x extent)
    std::vector<std::pair<double, double>> x_ranges;        // one per held range, in order
    std::vector<std::pair<int64_t, int64_t>> index_ranges;  // the held [begin, end)
    int64_t padding = 0;                                    // elements
  };

  // What setFrame() lit up on one lane (widget coordinates).
  struct DrawnHighlight {
    int rank = 0;
    QString lane;  // as DrawnLane::lane
    QString role;  // "send", "receive", "read", "write"
    QRectF bar;    // the band of the lane the role's bars fill (x: the axis' extent)
    std::vector<std::pair<double, double>> x_ranges;
    std::vector<std::pair<int64_t, int64_t>> index_ranges;
  };
  // The bars' colours per role (net::ReplayRole), and a dimmed strip's veil.
  static QColor roleColor(const QString& role);
  static QColor dimColor() { return QColor(255, 255, 255, 170); }

  static QColor backgroundColor() { return QColor(255, 255, 255); }
  static QColor bandColor() { return QColor(244, 245, 247); }   // every other strip's background
  static QColor emptyColor() { return QColor(255, 255, 255); }  // a lane where not held
  static QColor outlineColor() { return QColor(150, 150, 150); }
  // Tensor boundaries: across the empty part of a lane, and across what the rank holds.
  static QColor boundaryColor() { return QColor(140, 140, 140); }
  static QColor boundaryOnHeldColor() { return QColor(255, 255, 255, 190); }
  // The fill of a lane of `category` (the shared palette's).
  static QColor laneColor(MemCategory category);
  // A pixel column the rank holds `share` (0..1) of (ranges finer than a pixel: a tensor-parallel
  // column slice is one range per row): `color` paled towards emptyColor(), never the full colour.
  static QColor partColor(const QColor& color, double share);

  explicit HoldingsView(QWidget* parent = nullptr);

  using QWidget::update;  // repaint, still reachable beside the model overload
  // Takes the ranks' layouts (when they changed, see the file comment) and measured bytes.
  void update(const net::RunModel& run);

  // The header's first line ("zero2 on 4 ranks ..."), or what the view says instead of strips:
  // "Layout unknown: ..." when no rank sent a LAYOUT, "No run yet ..." without ranks.
  QString statusText() const { return status_; }
  // Ranks shown (0 .. ranks() - 1) and the model's flat size (0 without a layout).
  int ranks() const { return static_cast<int>(strips_.size()); }
  int64_t total() const { return total_; }
  // Whether `rank` sent a LAYOUT (false out of range).
  bool hasLayout(int rank) const;

  // At the current size: the axis (x: [0, total) maps to left() .. right(); y: from the first
  // lane's top to the last lane's bottom), empty when nothing is drawn; and every lane drawn.
  QRectF axisRect() const;
  std::vector<DrawnLane> drawnLanes() const;
  // The hover tooltip at `p` (see the file comment); empty where there is nothing to say.
  QString toolTipAt(QPoint p) const;

  // Lights up what `frame` touches (see the file comment); null: nothing lit, nothing dimmed.
  void setFrame(const net::ReplayFrame* frame);
  std::vector<DrawnHighlight> drawnHighlights() const;
  // Whether `rank`'s strip is dimmed: a frame is set and the rank is not in it.
  bool dimmed(int rank) const;

  QSize sizeHint() const override;
  QSize minimumSizeHint() const override;

 protected:
  bool event(QEvent* event) override;
  void paintEvent(QPaintEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;

 private:
  struct Lane {
    QString name;
    MemCategory category = MemCategory::params;
    int list = 0;  // 0 params, 1 grads, 2 optimizer_state: index into Strip::held and planned
    int64_t padding = 0;
    int64_t planned = 0;   // bytes, the formula's
    int64_t measured = 0;  // bytes
  };
  struct Strip {
    bool known = false;  // sent a LAYOUT
    bool truncated = false;
    bool measured = false;  // any MEMORY figure
    QString place;          // "pp0 tp0 dp2" from the HELLO ("" without one)
    QString formula;
    std::vector<telemetry::LayoutRange> held[3];  // params, grads, optimizer_state
    std::vector<Lane> lanes;
  };
  struct Run {  // pixel columns [x0, x1) of which the rank holds the same share
    int x0 = 0, x1 = 0;
    double share = 0;  // 0, 1, or k/16 in between
  };
  struct LaneGeometry {
    int strip = 0, lane = 0;
    QRectF box;             // on the axis
    std::vector<Run> runs;  // the whole axis, left to right
  };

  void takeLayouts(const net::RunModel& run);
  void takeMeasured(const net::RunModel& run);
  void ensureLayout() const;
  double xOf(int64_t index) const;  // after ensureLayout()
  int stripAt(int y) const;         // -1 when none
  QString bytesText(const Strip& s, const Lane& l) const;
  QString laneToolTip(int strip, int lane, QPoint p) const;

  // Data.
  std::vector<Strip> strips_;
  std::vector<telemetry::LayoutTensor> tensors_;
  int64_t total_ = 0;
  int64_t bytes_per_element_ = 4;
  QString status_;
  QStringList header_;  // lines under the status: the formulas, truncation
  bool any_layout_ = false;
  // The cache key of the layouts taken (see update()).
  const net::RunModel* source_ = nullptr;
  uint64_t source_layouts_ = 0;
  uint64_t source_events_ = 0;

  // Geometry (rebuilt lazily when the size or the data changed).
  mutable bool dirty_ = true;
  mutable QSize layout_size_;
  mutable QRectF axis_;
  mutable int line_ = 0, pitch_ = 0;
  mutable int rank_x_ = 0, lane_x_ = 0, stub_x_ = 0, bytes_x_ = 0;
  mutable int min_width_ = 0, content_height_ = 0;
  mutable int header_h_ = 0, ruler_y_ = 0, strips_y_ = 0;
  mutable std::vector<int> strip_top_, strip_bottom_;
  mutable std::vector<LaneGeometry> lanes_;
  mutable std::vector<double> boundaries_;  // tensor boundaries drawn (x), at least 2 px apart

  // The frame lit up: per rank, its touches (lane 0 params, 1 grads, 2 optimizer state).
  struct Touch {
    int list = 0;
    QString role;
    std::vector<telemetry::LayoutRange> ranges;
  };
  bool framed_ = false;
  std::vector<std::vector<Touch>> touches_;  // by rank
  std::vector<bool> in_frame_;               // by rank
};

}  // namespace shardlab::gui
