// CommHeatMap: every rank's seconds per step as a rank x step heat map, read from net::CommStats
// (RunModel::comm()), of one metric at a time (net::StepMetric, setMetric): the seconds each rank
// waited for the last rank of its collectives (the default), the transfer after that, its
// compute (PHASE spans), or its whole communication time.
//
//   rows    = ranks, rank 0 at the top;
//   columns = the steps of CommStats' window [first_step(), last_step()], the newest at the right;
//   colour  = seconds on the perceptual "inferno" scale (dark = little, bright yellow = much),
//             linear from 0 to scaleSeconds(): the 99th percentile of the window's non-zero cells,
//             so one outlier does not wash the rest out; hotter cells saturate.
//
// A straggler is the cold row among hot ones in wait (and communication): while it computes, its
// peers sit in the collective waiting for it, so their wait grows and its own stays small; in
// compute it is the hot row. Transfer is what is left when nobody waits: a row hot there has a
// slow link, not a slow rank. A run whose backend cannot measure waits (nccl, an old recording)
// has nothing in wait and transfer; the map says so instead of showing a black plot.
//
// Painting is cheap: update() copies the window into a QImage with one pixel per cell (and the
// figures into a float array for tooltips and tests); paintEvent scales that image into the plot
// rectangle with one drawImage and adds a few precomputed labels and the colour legend (in ms).
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

#include "net/comm_stats.h"

namespace shardlab::net {
class RunModel;
}

namespace shardlab::gui {

class CommHeatMap : public QWidget {
  Q_OBJECT
 public:
  // The colour of `fraction` (clamped to [0, 1]) of the scale.
  static QColor scaleColor(double fraction);
  static QColor backgroundColor() { return QColor(250, 250, 250); }

  explicit CommHeatMap(QWidget* parent = nullptr);

  using QWidget::update;  // repaint, still reachable beside the model overload
  // Copies the window of run.comm() for metric() and schedules a repaint.
  void update(const net::RunModel& run);

  // What the cells show; takes effect at the next update(run) (the map keeps only the figures of
  // the metric shown).
  void setMetric(net::StepMetric metric) { metric_ = metric; }
  net::StepMetric metric() const { return metric_; }
  // "wait", "transfer", "compute", "communication".
  static QString metricName(net::StepMetric metric);
  // True when the metric is wait or transfer and the run has no measured wait (see above).
  bool waitsUnknown() const { return waits_unknown_; }

  int ranks() const { return ranks_; }
  // The steps shown, both 0 when there is nothing to show.
  int64_t firstStep() const { return first_; }
  int64_t lastStep() const { return last_; }
  int steps() const { return ranks_ > 0 && last_ > 0 ? static_cast<int>(last_ - first_ + 1) : 0; }
  // Seconds at the top of the colour scale (0 when nothing is shown).
  double scaleSeconds() const { return scale_; }

  // The figure and the colour of one cell; 0 and an invalid QColor outside the map.
  double cellSeconds(int rank, int64_t step) const;
  QColor cellColor(int rank, int64_t step) const;
  // The cell under `p` (widget coordinates) as {rank, step}; {-1, 0} outside the plot.
  std::pair<int, int64_t> cellAt(QPoint p) const;
  // "rank r, step s: x ms wait" (the metric's name), or empty outside the plot: the hover
  // tooltip.
  QString toolTipAt(QPoint p) const;
  // Where the cells are drawn (widget coordinates).
  QRect plotRect() const;

  // "rank,step,<metric>_seconds" (wait_seconds, transfer_seconds, compute_seconds,
  // communication_seconds) then one row per cell, rank-major.
  QString csv() const;

  QSize sizeHint() const override { return QSize(640, 360); }
  QSize minimumSizeHint() const override { return QSize(160, 100); }

 protected:
  bool event(QEvent* event) override;
  void paintEvent(QPaintEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;

 private:
  void ensureLayout() const;
  void ensureDisplay() const;

  net::StepMetric metric_ = net::StepMetric::wait;
  bool waits_unknown_ = false;
  int ranks_ = 0;
  int64_t first_ = 0, last_ = 0;
  double scale_ = 0;
  std::vector<float> seconds_;  // ranks_ x steps(), rank-major
  QImage image_;                // steps() x ranks_, one pixel per cell
  // What is drawn: image_, or with more ranks than the plot has pixel rows, one row per pixel row
  // holding each step's coldest covered rank (a straggler's dark cell must not be skipped by the
  // scaling). Rebuilt lazily when the data or the plot's height changed.
  mutable QImage display_;
  mutable bool display_dirty_ = true;

  // Layout cache, rebuilt lazily when the size or the content's labels change.
  mutable bool layout_dirty_ = true;
  mutable QSize layout_size_;
  mutable QRect plot_, legend_;
  mutable QImage legend_image_;  // 1 x 256, hottest at the top
  struct Label {
    QPointF at;
    QStaticText text;
  };
  mutable std::vector<Label> labels_;
};

}  // namespace shardlab::gui
