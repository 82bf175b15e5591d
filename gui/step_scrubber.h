// StepScrubber: one step, phase by phase, above the "Who holds what" strips. It replays a step
// from the run's events (net/step_replay.h) and steps through its frames:
//
//   One step: [step 40 ▾] [x] live  [◀] ======o========== [▶]  frame 8 of 13
//   reduce_scatter of grads, block 2 on world: ranks 0-3, 0.07 ms
//   Each of the 4 ranks sends its partial gradient sums of block 2 and gets back the average of
//   its own slice only.                    ■ send  ■ receive  ■ read  ■ write
//
// - Live (the default) follows the newest step every rank has completed (RunModel::
//   newest_replay()), keeping the frame index while the frames' count allows; picking a step or
//   moving through the frames stops following, and ticking live follows again.
// - ◀ / ▶ (and the Left / Right keys while it has focus) move one frame; the slider any.
// - The replay is computed again only when the step shown changes, never on every update().
// - With nothing to replay it shows replay_step()'s note, disabled.
// frameChanged() is emitted with the frame shown (null: none); HoldingsView::setFrame draws it.
#pragma once

#include <QWidget>

#include <cstdint>

#include "net/step_replay.h"

class QCheckBox;
class QLabel;
class QPushButton;
class QSlider;
class QSpinBox;

namespace shardlab::net {
class RunModel;
}

namespace shardlab::gui {

class StepScrubber : public QWidget {
  Q_OBJECT
 public:
  explicit StepScrubber(QWidget* parent = nullptr);

  // Takes a new replay when the step to show changed (see the file comment).
  void update(const net::RunModel& run);

  const net::StepReplay& replay() const { return replay_; }
  int frameIndex() const { return index_; }  // -1: none
  const net::ReplayFrame* currentFrame() const;
  bool live() const { return live_; }
  // The frame's title line and explanation as shown.
  QString titleText() const;
  QString explainText() const;

  // The same as the controls: one frame back or on, frame i, a step of the run (stops following
  // the newest), following the newest again.
  void previous();
  void next();
  void setFrameIndex(int index);
  void setStep(int64_t step);
  void setLive(bool live);

 signals:
  void frameChanged(const shardlab::net::ReplayFrame* frame);

 protected:
  void keyPressEvent(QKeyEvent* event) override;

 private:
  void take(net::StepReplay replay);
  void refresh();

  const net::RunModel* run_ = nullptr;
  uint64_t events_ = 0;  // run_->events() when last updated
  net::StepReplay replay_;
  int64_t wanted_ = 0;  // the step picked (0: live)
  int index_ = -1;
  bool live_ = true;
  bool filling_ = false;  // setting the controls: their signals are not the user's

  QSpinBox* step_;
  QCheckBox* live_box_;
  QPushButton* prev_;
  QPushButton* next_;
  QSlider* slider_;
  QLabel* position_;
  QLabel* title_;
  QLabel* explain_;
};

}  // namespace shardlab::gui
