#include "gui/teaching_bar.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>

namespace shardlab::gui {

TeachingBar::TeachingBar(QWidget* parent) : QFrame(parent) {
  setObjectName("teachingBar");
  setFrameShape(QFrame::StyledPanel);
  // A banner that does not look like an error or a stalled run.
  setStyleSheet("#teachingBar { background: #fff4d6; }");
  banner_ = new QLabel(this);
  banner_->setWordWrap(true);
  next_phase_ = new QPushButton(tr("Next phase"), this);
  next_step_ = new QPushButton(tr("Next step"), this);
  run_ = new QPushButton(tr("Run"), this);
  next_phase_->setToolTip(tr("Every rank runs exactly one more phase, then waits again"));
  next_step_->setToolTip(tr("Every rank runs to the end of this step's update"));
  run_->setToolTip(tr("Let the run go on without stopping again"));
  auto* row = new QHBoxLayout(this);
  row->addWidget(banner_, 1);
  row->addWidget(next_phase_);
  row->addWidget(next_step_);
  row->addWidget(run_);
  const auto send = [this](TeachingCommand c) {
    if (gate_) gate_->command(c);
    refresh();
  };
  connect(next_phase_, &QPushButton::clicked, this, [send] { send(TeachingCommand::next_phase); });
  connect(next_step_, &QPushButton::clicked, this, [send] { send(TeachingCommand::next_step); });
  connect(run_, &QPushButton::clicked, this, [send] { send(TeachingCommand::run); });
  hide();
}

void TeachingBar::setGate(std::shared_ptr<TeachingGate> gate) {
  gate_ = std::move(gate);
  setVisible(gate_ != nullptr);
  refresh();
}

void TeachingBar::refresh() {
  if (!gate_) return;
  const TeachingStatus s = gate_->status();
  banner_->setText(QString::fromStdString(teaching_banner(s)));
  for (QPushButton* b : {next_phase_, next_step_, run_}) b->setEnabled(!s.free);
}

QString TeachingBar::bannerText() const {
  return banner_->text();
}

}  // namespace shardlab::gui
