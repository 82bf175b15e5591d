#include "net/web/replay_cursor.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace shardlab::net {

namespace {

// An event's time, or nullopt for a message without one (HELLO), or a non-finite time.
bool event_time(const Message& m, double& t) {
  const auto* e = std::get_if<telemetry::Event>(&m);
  if (!e || !std::isfinite(e->time) || e->time <= 0) return false;
  t = e->time;
  return true;
}

}  // namespace

ReplayCursor::ReplayCursor(std::shared_ptr<const std::vector<Message>> messages)
    : messages_(std::move(messages)), model_(std::make_unique<RunModel>()) {
  double first = std::numeric_limits<double>::infinity(), last = 0;
  for (const Message& m : *messages_) {
    double t = 0;
    if (!event_time(m, t)) continue;
    first = std::min(first, t);
    last = std::max(last, t);
  }
  if (std::isfinite(first)) {
    start_ = first;
    duration_ = last - first;
  }
  apply_until(0);
}

void ReplayCursor::apply_until(double position) {
  const double t = start_ + position;
  // In recording order, up to the first event past the position (events arrive roughly but not
  // strictly in time order across ranks, as they did live).
  while (next_ < messages_->size()) {
    double et = 0;
    if (event_time((*messages_)[next_], et) && et > t) break;
    model_->add((*messages_)[next_]);
    ++next_;
  }
}

void ReplayCursor::advance(double seconds) {
  if (!playing_ || !(seconds > 0)) return;
  position_ = std::min(duration_, position_ + seconds * speed_);
  apply_until(position_);
  if (position_ >= duration_) {
    apply_until(std::numeric_limits<double>::infinity());
    playing_ = false;
  }
}

void ReplayCursor::seek(double seconds) {
  if (!std::isfinite(seconds)) return;
  const double target = std::clamp(seconds, 0.0, duration_);
  if (target < position_) {
    model_ = std::make_unique<RunModel>();
    next_ = 0;
  }
  position_ = target;
  apply_until(target >= duration_ ? std::numeric_limits<double>::infinity() : target);
}

void ReplayCursor::set_speed(double speed) {
  if (std::isfinite(speed)) speed_ = std::clamp(speed, 0.1, 100.0);
}

ReplayPosition ReplayCursor::position() const {
  ReplayPosition p;
  p.duration = duration_;
  p.position = position_;
  p.playing = playing_;
  p.speed = speed_;
  p.step = model_->newest_step();
  return p;
}

}  // namespace shardlab::net
