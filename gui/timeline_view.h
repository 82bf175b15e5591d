// TimelineView: what every rank did during the last few steps, one horizontal lane per rank, read
// from net::Timeline (RunModel::timeline()).
//
//   +--------------------------------------------------------------------------------+
//   | [] forward [] backward [] optimizer [] collective [] idle        note          |  legend
//   | 0 |####....====######|####.....                                                |  lanes
//   | 1 |......####==####..|......####                                               |
//   |   0 ms                                                          95.0 ms        |  time
//   +--------------------------------------------------------------------------------+
//
// - The window is Timeline::recent_window(steps()) (default 3 steps), time running left to right.
// - Forward, backward and optimizer spans fill the lane in their colours (with interleaved 1F1B
//   the forwards and backwards of odd model chunks lighter: computeColor); collectives (and sends)
//   fill it where the rank computes nothing, and are drawn as a thinner band across the lane's
//   middle third where they overlap compute (a failed collective in failedColor()).
// - Idle time is the lane's background (idleColor(), light grey), so pipeline bubbles and ranks
//   waiting for a straggler show as grey gaps. Step ends (StepMark::end) are thin dark lines.
// - A rank column on the left labels the lanes; with many ranks lanes get thinner (at least 1 px)
//   and only every k-th lane is labelled. Ranks that do not fit at 1 px are not drawn, and the
//   legend row says which ranks are shown.
//
// Painting is cheap: update() copies the window's spans (relative to the window start) and the
// lanes are rasterised into one QImage, one pixel column per time slot, whenever the data or the
// size changes; paintEvent is one unscaled drawImage plus precomputed labels.
#pragma once

#include <QColor>
#include <QImage>
#include <QRect>
#include <QStaticText>
#include <QString>
#include <QWidget>

#include <cstdint>
#include <utility>
#include <vector>

#include "net/timeline.h"

namespace shardlab::net {
class RunModel;
}

namespace shardlab::gui {

class TimelineView : public QWidget {
  Q_OBJECT
 public:
  static constexpr int kDefaultSteps = 3;

  // Colours used for drawing, public so tests and legends can refer to them. The kinds', idle
  // time's and a failed collective's come from engine/telemetry/palette.h, as on the web page.
  static QColor kindColor(net::SpanKind kind);
  // A forward's or backward's colour on model chunk `chunk` (interleaved 1F1B: chunk c of stage s
  // is virtual stage c * pp + s): kindColor on even chunks, lighter on odd ones.
  static QColor computeColor(net::SpanKind kind, int chunk);
  static QColor failedColor();
  static QColor idleColor();
  static QColor stepLineColor() { return QColor(70, 70, 70); }
  static QColor backgroundColor() { return QColor(250, 250, 250); }

  explicit TimelineView(QWidget* parent = nullptr);

  using QWidget::update;  // repaint, still reachable beside the model overload
  // Copies the spans of run.timeline() inside its recent_window(steps()) and redraws.
  void update(const net::RunModel& run);

  // How many of the most recent steps to show (at least 1). Takes effect at the next
  // update(run); emits stepsChanged so the owner can call it at once.
  void setSteps(int steps);
  int steps() const { return steps_; }

  // The window shown, epoch seconds; {0, 0} before any step mark.
  std::pair<double, double> window() const { return window_; }
  int ranks() const { return static_cast<int>(lanes_.size()); }
  // What is drawn for `rank` at `time` (epoch seconds) in the lane's main fill: the colour of the
  // compute span there, else of the collective there, else idleColor(); an invalid QColor outside
  // the window or for an unknown rank. (Step lines and the collective band over compute are not
  // reported.)
  QColor colorAt(int rank, double time) const;
  // 1 - busy / window length over the window (Timeline::busy_seconds); 0 for an empty window or a
  // rank out of range.
  double idleFraction(int rank) const;

  // Geometry at the current size: the rectangle the lanes are drawn in, each lane's rectangle
  // (empty when the rank is not drawn), the lane pitch in pixels, and the ranks drawn (0 ..
  // visibleRanks() - 1).
  QRect plotRect() const;
  QRect laneRect(int rank) const;
  int laneHeight() const;
  int visibleRanks() const;
  // The hover tooltip at `p`: rank, span kind, micro-batch or collective label, duration; "idle"
  // in a gap; empty outside the lanes.
  QString toolTipAt(QPoint p) const;

  // "rank,kind,label,start,end": every span overlapping the window, times in seconds relative to
  // the window start; label is the micro-batch (forward/backward), the collective's "op group"
  // (with " (failed)" when it failed), empty for the optimizer.
  QString csv() const;

  QSize sizeHint() const override { return QSize(720, 360); }
  QSize minimumSizeHint() const override { return QSize(200, 80); }

 signals:
  void stepsChanged(int steps);

 protected:
  bool event(QEvent* event) override;
  void paintEvent(QPaintEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;

 private:
  struct Item {
    double start = 0, end = 0;  // seconds after the window start
    net::SpanKind kind = net::SpanKind::forward;
    int32_t micro_batch = -1;
    int32_t chunk = 0;  // forward/backward: the model chunk (0 without interleaving)
    uint32_t label = 0;
    bool ok = true;
  };
  struct Lane {
    std::vector<Item> items;    // sorted by start
    std::vector<double> marks;  // step ends, seconds after the window start
    double idle = 0;            // idle fraction
  };
  struct Text {
    QPointF at;
    QStaticText text;
  };

  void ensureLayout() const;
  const Item* itemAt(int rank, int x) const;  // the span drawn at pixel column x of the lane
  double length() const { return window_.second - window_.first; }

  int steps_ = kDefaultSteps;
  std::pair<double, double> window_{0, 0};
  std::vector<Lane> lanes_;
  bool chunked_ = false;  // a forward or backward of a chunk > 0 is in the window (interleaved)
  std::vector<QString> labels_;  // Timeline::labels()

  // Layout and raster cache, rebuilt lazily when the size or the data changed.
  mutable bool dirty_ = true;
  mutable QSize layout_size_;
  mutable QRect plot_;
  mutable int lane_h_ = 0;
  mutable int visible_ = 0;
  mutable QImage image_;
  mutable std::vector<Text> texts_;
  mutable std::vector<std::pair<QRect, QColor>> swatches_;
};

}  // namespace shardlab::gui
