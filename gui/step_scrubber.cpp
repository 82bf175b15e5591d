#include "gui/step_scrubber.h"

#include <QCheckBox>
#include <QHBoxLayout>
#include <QKeyEvent>
#include <QLabel>
#include <QPushButton>
#include <QSlider>
#include <QSpinBox>
#include <QVBoxLayout>

#include <algorithm>

#include "engine/core/human_format.h"
#include "gui/holdings_view.h"
#include "net/run_model.h"

namespace shardlab::gui {

namespace {

QString legendHtml() {
  QString out;
  for (const char* role : {"send", "receive", "read", "write"})
    out += QStringLiteral("<span style=\"color:%1\">&#9632;</span>&nbsp;%2&nbsp;&nbsp;")
               .arg(HoldingsView::roleColor(role).name(), StepScrubber::tr(role));
  return out;
}

QString durationText(double seconds) {
  if (seconds < 1e-3) return QStringLiteral("%1 µs").arg(seconds * 1e6, 0, 'f', 0);
  if (seconds < 1) return QStringLiteral("%1 ms").arg(seconds * 1e3, 0, 'f', 2);
  return QStringLiteral("%1 s").arg(seconds, 0, 'f', 2);
}

}  // namespace

StepScrubber::StepScrubber(QWidget* parent) : QWidget(parent) {
  setFocusPolicy(Qt::StrongFocus);
  auto* column = new QVBoxLayout(this);
  column->setContentsMargins(6, 4, 6, 4);
  auto* row = new QHBoxLayout;
  row->addWidget(new QLabel(tr("<b>One step, phase by phase:</b>")));
  step_ = new QSpinBox;
  step_->setObjectName("replayStep");
  step_->setPrefix(tr("step "));
  step_->setToolTip(tr("The step replayed (the timeline keeps each rank's newest spans)"));
  row->addWidget(step_);
  live_box_ = new QCheckBox(tr("live"));
  live_box_->setObjectName("replayLive");
  live_box_->setToolTip(tr("Follow the newest step every rank has completed"));
  live_box_->setChecked(true);
  row->addWidget(live_box_);
  prev_ = new QPushButton(QStringLiteral("◀"));
  prev_->setObjectName("replayPrevious");
  prev_->setToolTip(tr("The frame before (Left)"));
  next_ = new QPushButton(QStringLiteral("▶"));
  next_->setObjectName("replayNext");
  next_->setToolTip(tr("The next frame (Right)"));
  slider_ = new QSlider(Qt::Horizontal);
  slider_->setObjectName("replayFrame");
  row->addWidget(prev_);
  row->addWidget(slider_, 1);
  row->addWidget(next_);
  position_ = new QLabel;
  row->addWidget(position_);
  column->addLayout(row);
  title_ = new QLabel;
  title_->setObjectName("replayTitle");
  title_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  QFont bold = title_->font();
  bold.setBold(true);
  title_->setFont(bold);
  column->addWidget(title_);
  auto* bottom = new QHBoxLayout;
  explain_ = new QLabel;
  explain_->setObjectName("replayExplain");
  explain_->setWordWrap(true);
  explain_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  bottom->addWidget(explain_, 1);
  auto* legend = new QLabel(legendHtml());
  legend->setToolTip(
      tr("Upper half of a lane: what a rank sends or reads; lower half: what it receives or "
         "writes. Ranks not in the frame are dimmed."));
  bottom->addWidget(legend);
  column->addLayout(bottom);

  connect(prev_, &QPushButton::clicked, this, &StepScrubber::previous);
  connect(next_, &QPushButton::clicked, this, &StepScrubber::next);
  connect(slider_, &QSlider::valueChanged, this, [this](int v) {
    if (!filling_) setFrameIndex(v);
  });
  connect(step_, &QSpinBox::valueChanged, this, [this](int v) {
    if (!filling_) setStep(v);
  });
  connect(live_box_, &QCheckBox::toggled, this, [this](bool on) {
    if (!filling_) setLive(on);
  });
  refresh();
}

const net::ReplayFrame* StepScrubber::currentFrame() const {
  if (index_ < 0 || index_ >= static_cast<int>(replay_.frames.size())) return nullptr;
  return &replay_.frames[static_cast<size_t>(index_)];
}

void StepScrubber::update(const net::RunModel& run) {
  // Another model, or the same one started afresh (fewer events than before): replay again.
  const bool fresh = run_ != &run || run.events() < events_;
  run_ = &run;
  events_ = run.events();
  if (live_) {
    const net::StepReplay* newest = run.newest_replay();
    const int64_t step = newest ? newest->step : 0;
    if (!fresh && step == replay_.step && (step != 0 || !replay_.note.empty())) return;
    take(net::replay_step(run, 0));
  } else if (fresh || wanted_ != replay_.step) {
    take(net::replay_step(run, wanted_));
  }
}

void StepScrubber::take(net::StepReplay replay) {
  replay_ = std::move(replay);
  const int n = static_cast<int>(replay_.frames.size());
  index_ = n == 0 ? -1 : std::clamp(index_, 0, n - 1);
  refresh();
  emit frameChanged(currentFrame());
}

void StepScrubber::previous() {
  setFrameIndex(index_ - 1);
}
void StepScrubber::next() {
  setFrameIndex(index_ + 1);
}

void StepScrubber::setFrameIndex(int index) {
  const int n = static_cast<int>(replay_.frames.size());
  if (n == 0) return;
  index = std::clamp(index, 0, n - 1);
  if (live_) setLive(false);  // looking at a frame: the step stays
  if (index == index_) return;
  index_ = index;
  refresh();
  emit frameChanged(currentFrame());
}

void StepScrubber::setStep(int64_t step) {
  live_ = false;
  wanted_ = step;
  if (run_ && step != replay_.step) take(net::replay_step(*run_, step));
  refresh();
}

void StepScrubber::setLive(bool live) {
  live_ = live;
  wanted_ = live ? 0 : replay_.step;
  if (live && run_) take(net::replay_step(*run_, 0));
  refresh();
}

QString StepScrubber::titleText() const {
  return title_->text();
}
QString StepScrubber::explainText() const {
  return explain_->text();
}

void StepScrubber::refresh() {
  filling_ = true;
  const int n = static_cast<int>(replay_.frames.size());
  const bool any = n > 0;
  for (QWidget* w : std::initializer_list<QWidget*>{prev_, next_, slider_}) w->setEnabled(any);
  step_->setEnabled(!replay_.steps.empty());
  if (!replay_.steps.empty())
    step_->setRange(static_cast<int>(replay_.steps.front()),
                    static_cast<int>(replay_.steps.back()));
  step_->setValue(static_cast<int>(replay_.step));
  live_box_->setChecked(live_);
  slider_->setRange(0, std::max(0, n - 1));
  slider_->setValue(std::max(0, index_));
  position_->setText(any ? tr("frame %1 of %2").arg(index_ + 1).arg(n) : QString());
  if (const net::ReplayFrame* f = currentFrame()) {
    std::vector<int> ranks;
    for (const net::ReplayRank& r : f->ranks) ranks.push_back(r.rank);
    QString title = QString::fromStdString(f->title) + QStringLiteral(": ") +
                    QString::fromStdString(rank_list(ranks, {.label = true})) +
                    QStringLiteral(", ") + durationText(f->end - f->start);
    if (f->inside > 0) title += tr(" (with %n more transfer(s) of activations)", "", f->inside);
    title_->setText(title);
    explain_->setText(QString::fromStdString(f->explain));
  } else {
    title_->setText(replay_.note.empty() ? tr("Nothing to replay yet")
                                         : QString::fromStdString(replay_.note));
    explain_->setText(QString());
  }
  filling_ = false;
}

void StepScrubber::keyPressEvent(QKeyEvent* event) {
  if (event->key() == Qt::Key_Left) {
    previous();
  } else if (event->key() == Qt::Key_Right) {
    next();
  } else {
    QWidget::keyPressEvent(event);
  }
}

}  // namespace shardlab::gui
