// TeachingBar: the app's controls for a teaching run (job telemetry.teaching; the gate is
// engine/telemetry/teaching_gate.h): a banner saying the run is paused on purpose, after which
// phase of which step, and three buttons: Next phase (every rank runs one more phase), Next step
// (to the end of the current step's update) and Run (never held again); the banner's words are
// the engine's (teaching_banner), as the page's are. Hidden for a run without
// teaching mode. The app showing the run is its viewer: RunController tells the gate so on every
// poll, so the gate's viewer timeout only lets the run go on when the app has gone.
#pragma once

#include <QFrame>

#include <memory>

#include "engine/telemetry/teaching_gate.h"

class QLabel;
class QPushButton;

namespace shardlab::gui {

class TeachingBar : public QFrame {
  Q_OBJECT
 public:
  explicit TeachingBar(QWidget* parent = nullptr);
  // The run's gate (null: no teaching run; the bar hides).
  void setGate(std::shared_ptr<TeachingGate> gate);
  // Shows the gate's state now (call on every update of the run).
  void refresh();
  QString bannerText() const;
  QPushButton* nextPhaseButton() const { return next_phase_; }
  QPushButton* nextStepButton() const { return next_step_; }
  QPushButton* runButton() const { return run_; }

 private:
  std::shared_ptr<TeachingGate> gate_;
  QLabel* banner_;
  QPushButton *next_phase_, *next_step_, *run_;
};

}  // namespace shardlab::gui
