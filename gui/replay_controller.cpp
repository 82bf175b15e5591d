#include "gui/replay_controller.h"

#include <QFileInfo>

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <numeric>
#include <utility>

#include "net/recording.h"

namespace shardlab::gui {

ReplayController::ReplayController(QObject* parent) : QObject(parent) {
  timer_.setInterval(kPollMs);
  connect(&timer_, &QTimer::timeout, this, &ReplayController::tick);
}

bool ReplayController::open(const QString& path) {
  net::RecordingContents contents;
  try {
    contents = net::read_recording(path.toStdString());
  } catch (const std::exception& e) {
    error_ = QString::fromUtf8(e.what());
    if (!error_.contains(path)) error_ = tr("%1: %2").arg(path, error_);
    return false;
  }
  pause();
  // HELLOs first (they carry no time), then the events stably by time; a non-finite time sorts
  // first, so it cannot break the ordering.
  constexpr double kBefore = -std::numeric_limits<double>::infinity();
  std::vector<std::pair<double, size_t>> order;
  order.reserve(contents.messages.size());
  size_t hellos = 0;
  for (size_t i = 0; i < contents.messages.size(); ++i) {
    const net::Message& m = contents.messages[i];
    if (std::holds_alternative<net::Hello>(m)) {
      order.emplace_back(kBefore, i);
      ++hellos;
    } else if (const auto* e = std::get_if<telemetry::Event>(&m)) {
      order.emplace_back(std::isfinite(e->time) ? e->time : kBefore, i);
    }
  }
  std::stable_sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
    const bool ha = std::holds_alternative<net::Hello>(contents.messages[a.second]);
    const bool hb = std::holds_alternative<net::Hello>(contents.messages[b.second]);
    if (ha != hb) return ha;
    return a.first < b.first;
  });
  messages_.clear();
  times_.clear();
  messages_.reserve(order.size());
  times_.reserve(order.size());
  for (const auto& [t, i] : order) {
    messages_.push_back(std::move(contents.messages[i]));
    times_.push_back(t);
  }
  hellos_ = hellos;
  start_ = end_ = 0;
  bool any = false;
  for (size_t i = hellos_; i < times_.size(); ++i) {
    if (!std::isfinite(times_[i])) continue;
    if (!any) start_ = times_[i];
    end_ = times_[i];
    any = true;
  }
  path_ = path;
  note_ = contents.complete ? QString() : QString::fromStdString(contents.note);
  error_.clear();
  // From scratch: position before everything, then to the start.
  model_ = net::RunModel{};
  for (size_t i = 0; i < hellos_; ++i) model_.add(messages_[i]);
  next_ = hellos_;
  position_ = start_;
  advance_to(start_);
  emit updated();
  return true;
}

void ReplayController::advance_to(double t) {
  if (t < position_) {
    model_ = net::RunModel{};
    for (size_t i = 0; i < hellos_; ++i) model_.add(messages_[i]);
    next_ = hellos_;
  }
  while (next_ < messages_.size() && times_[next_] <= t) model_.add(messages_[next_++]);
  position_ = t;
}

void ReplayController::seek(double t) {
  advance_to(t);
  emit updated();
}

void ReplayController::play(double speed) {
  speed_ = speed > 0 && std::isfinite(speed) ? speed : 1.0;
  if (position_ >= end_ && next_ >= messages_.size()) advance_to(start_);
  clock_.start();
  timer_.start();
}

void ReplayController::pause() {
  timer_.stop();
}

void ReplayController::tick() {
  const double elapsed = static_cast<double>(clock_.restart()) / 1000.0;
  const double target = std::min(end_, position_ + elapsed * speed_);
  advance_to(target);
  emit updated();
  if (target >= end_) {
    // Whatever lies beyond (nothing, unless times are odd) comes in too.
    while (next_ < messages_.size()) model_.add(messages_[next_++]);
    pause();
    emit finished();
  }
}

}  // namespace shardlab::gui
