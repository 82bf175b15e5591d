#include "engine/comm/flight_recorder.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "engine/core/error.h"
#include "engine/core/human_format.h"
#include "engine/core/json_text.h"

namespace shardlab {
namespace {

// One line, for the text form.
std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

bool p2p(CommOp op) {
  return op == CommOp::Send || op == CommOp::Recv;
}

}  // namespace

const char* to_string(FlightRecorder::State state) {
  switch (state) {
    case FlightRecorder::State::Issued:
      return "issued";
    case FlightRecorder::State::Completed:
      return "completed";
    case FlightRecorder::State::Failed:
      return "failed";
    case FlightRecorder::State::TimedOut:
      return "timed_out";
  }
  return "?";
}

FlightRecorder::FlightRecorder(FlightRecorderOptions options)
    : capacity_(options.capacity),
      rank_(options.rank),
      origin_(Clock::now()),
      origin_unix_s_(
          std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
              .count()) {
  SL_ENFORCE(capacity_ >= 1, "a flight recorder needs room for at least one entry, got {}",
             capacity_);
  ring_.resize(capacity_);
}

uint64_t FlightRecorder::issued(const CommRecord& record) {
  std::lock_guard lock(mu_);
  const uint64_t id = next_id_++;
  Entry& e = ring_[(id - 1) % capacity_];
  e.id = id;
  e.op = record.op;
  e.group.assign(record.group);  // reuses the slot's buffer
  e.group_rank = record.rank;
  e.group_size = record.group_size;
  e.seq = record.seq;
  e.bytes = record.bytes;
  e.peer = record.peer;
  e.tag = record.tag;
  e.state = State::Issued;
  e.issued = record.start;
  e.completed = {};
  e.error.clear();
  return id;
}

FlightRecorder::Entry* FlightRecorder::find(uint64_t id) {
  if (id == 0 || id >= next_id_) return nullptr;
  Entry& e = ring_[(id - 1) % capacity_];
  return e.id == id ? &e : nullptr;
}

void FlightRecorder::completed(uint64_t id, Clock::time_point when) {
  std::lock_guard lock(mu_);
  Entry* e = find(id);
  if (!e || e->state != State::Issued) return;
  e->state = State::Completed;
  e->completed = when;
}

void FlightRecorder::failed(uint64_t id, State state, const std::string& what,
                            Clock::time_point when) {
  std::lock_guard lock(mu_);
  Entry* e = find(id);
  if (!e || e->state == State::Completed) return;
  if (e->state != State::Issued) {
    if (!e->error.empty()) return;  // the first report with a message wins
  } else {
    e->completed = when;
  }
  e->state = state == State::TimedOut ? State::TimedOut : State::Failed;
  e->error = what;
}

std::vector<FlightRecorder::Entry> FlightRecorder::snapshot() const {
  std::lock_guard lock(mu_);
  const uint64_t n = std::min<uint64_t>(next_id_ - 1, capacity_);
  std::vector<Entry> out;
  out.reserve(n);
  for (uint64_t id = next_id_ - n; id < next_id_; ++id) out.push_back(ring_[(id - 1) % capacity_]);
  return out;
}

uint64_t FlightRecorder::total() const {
  std::lock_guard lock(mu_);
  return next_id_ - 1;
}

std::string FlightRecorder::to_text() const {
  const std::vector<Entry> entries = snapshot();
  const uint64_t all = total();
  auto secs = [&](Clock::time_point t) {
    return std::chrono::duration<double>(t - origin_).count();
  };
  std::string s = fmt::format(
      "flight record of rank {}: the last {} of {} operations (ring of {}), oldest first; times "
      "in seconds since the recorder started\n",
      rank(), entries.size(), all, capacity_);
  for (const Entry& e : entries) {
    s += fmt::format("#{} {} {} rank {}/{}", e.seq, to_string(e.op), e.group, e.group_rank,
                     e.group_size);
    if (p2p(e.op))
      s += fmt::format(" {} rank {} tag {}", e.op == CommOp::Send ? "to" : "from", e.peer, e.tag);
    else if (e.op == CommOp::Broadcast)
      s += fmt::format(" root {}", e.peer);
    if (e.op != CommOp::Barrier) {
      s += ' ';
      s += human_bytes(e.bytes);
    }
    s += fmt::format(" issued {:.3f} s", secs(e.issued));
    switch (e.state) {
      case State::Issued:
        s += " -- NOT COMPLETED";
        break;
      case State::Completed:
        s += fmt::format(" completed {:.3f} s", secs(e.completed));
        break;
      case State::Failed:
      case State::TimedOut:
        s += fmt::format(" -- {} at {:.3f} s", e.state == State::Failed ? "FAILED" : "TIMED OUT",
                         secs(e.completed));
        if (!e.error.empty()) {
          s += ": ";
          s += one_line(e.error);
        }
        break;
    }
    s += '\n';
  }
  return s;
}

std::string FlightRecorder::to_json() const {
  const std::vector<Entry> entries = snapshot();
  auto secs = [&](Clock::time_point t) {
    return std::chrono::duration<double>(t - origin_).count();
  };
  std::string s = fmt::format(
      "{{\"format\":\"shardlab-flight-record\",\"version\":1,\"rank\":{},\"capacity\":{},"
      "\"total\":{},\"origin_unix_s\":{:.6f},\"entries\":[",
      rank(), capacity_, total(), origin_unix_s_);
  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    s += fmt::format(
        "{}\n{{\"id\":{},\"op\":\"{}\",\"group\":{},\"group_rank\":{},\"group_size\":{},"
        "\"seq\":{},\"bytes\":{},\"peer\":{},\"tag\":{},\"state\":\"{}\",\"issued_s\":{:.6f}",
        i ? "," : "", e.id, to_string(e.op), json_string(e.group), e.group_rank, e.group_size,
        e.seq, e.bytes, e.peer, e.tag, to_string(e.state), secs(e.issued));
    if (e.state != State::Issued) s += fmt::format(",\"completed_s\":{:.6f}", secs(e.completed));
    if (!e.error.empty()) s += ",\"error\":" + json_string(e.error);
    s += "}";
  }
  return s + "\n]}\n";
}

void FlightRecorder::write(const std::string& path) const {
  namespace fs = std::filesystem;
  const bool json = fs::path(path).extension() == ".json";
  const std::string text = json ? to_json() : to_text();
  // Unique per process and thread: ranks that are threads may write at once (to other paths).
  const std::string tmp = fmt::format("{}.tmp.{}.{}", path, static_cast<long>(::getpid()),
                                      std::hash<std::thread::id>{}(std::this_thread::get_id()));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out)
      SL_THROW(IoError, "cannot write the flight record to {}: cannot create {}", path, tmp);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.close();
    if (!out) {
      std::remove(tmp.c_str());
      SL_THROW(IoError, "cannot write the flight record to {}: writing {} failed", path, tmp);
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    SL_THROW(IoError, "cannot write the flight record to {}: {}", path, ec.message());
  }
}

std::string FlightRecorder::dump(const std::string& dir) const {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) SL_THROW(IoError, "cannot create the flight record folder {}: {}", dir, ec.message());
  const std::string base = (fs::path(dir) / fmt::format("flight-rank{}", rank())).string();
  write(base + ".json");
  write(base + ".txt");
  return base + ".txt";
}

}  // namespace shardlab
