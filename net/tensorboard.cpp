#include "net/tensorboard.h"

#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <bit>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "engine/core/error.h"
#include "net/time_accounting.h"

namespace shardlab::net {

namespace tfevents {

namespace {

// Reflected CRC-32C, one byte at a time through a 256-entry table (the table is the polynomial's
// remainder of each byte value, computed here at compile time).
constexpr uint32_t kCastagnoliReflected = 0x82F63B78u;

constexpr std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1u) ? (c >> 1) ^ kCastagnoliReflected : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr std::array<uint32_t, 256> kTable = make_table();

// Protobuf wire types.
constexpr int kVarint = 0;
constexpr int kFixed64 = 1;
constexpr int kLengthDelimited = 2;
constexpr int kFixed32 = 5;

void append_key(std::string& out, int field, int wire_type) {
  append_varint(out, (static_cast<uint64_t>(field) << 3) | static_cast<uint64_t>(wire_type));
}

void append_le(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFFu));
}

// Field numbers (tensorflow/core/util/event.proto, tensorflow/core/framework/summary.proto).
constexpr int kEventWallTime = 1;
constexpr int kEventStep = 2;
constexpr int kEventFileVersion = 3;
constexpr int kEventSummary = 5;
constexpr int kSummaryValue = 1;
constexpr int kValueTag = 1;
constexpr int kValueSimpleValue = 2;

}  // namespace

uint32_t crc32c(std::string_view bytes) {
  uint32_t c = 0xFFFFFFFFu;
  for (const char ch : bytes) c = kTable[(c ^ static_cast<uint8_t>(ch)) & 0xFFu] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(std::string_view bytes) {
  const uint32_t c = crc32c(bytes);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

void append_varint(std::string& out, uint64_t value) {
  while (value >= 0x80u) {
    out.push_back(static_cast<char>((value & 0x7Fu) | 0x80u));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

void append_double_field(std::string& out, int field, double value) {
  append_key(out, field, kFixed64);
  append_le(out, std::bit_cast<uint64_t>(value), 8);
}

void append_float_field(std::string& out, int field, float value) {
  append_key(out, field, kFixed32);
  append_le(out, std::bit_cast<uint32_t>(value), 4);
}

void append_int64_field(std::string& out, int field, int64_t value) {
  append_key(out, field, kVarint);
  append_varint(out, static_cast<uint64_t>(value));
}

void append_bytes_field(std::string& out, int field, std::string_view bytes) {
  append_key(out, field, kLengthDelimited);
  append_varint(out, bytes.size());
  out.append(bytes);
}

std::string record(std::string_view data) {
  std::string out;
  out.reserve(data.size() + 16);
  append_le(out, data.size(), 8);
  append_le(out, masked_crc32c(std::string_view(out.data(), 8)), 4);
  out.append(data);
  append_le(out, masked_crc32c(data), 4);
  return out;
}

std::string file_version_event(double wall_time) {
  std::string e;
  append_double_field(e, kEventWallTime, wall_time);
  append_bytes_field(e, kEventFileVersion, "brain.Event:2");
  return e;
}

std::string scalars_event(double wall_time, int64_t step, const std::vector<Scalar>& scalars) {
  std::string summary;
  for (const Scalar& s : scalars) {
    std::string value;
    append_bytes_field(value, kValueTag, s.tag);
    append_float_field(value, kValueSimpleValue, s.value);
    append_bytes_field(summary, kSummaryValue, value);
  }
  std::string e;
  append_double_field(e, kEventWallTime, wall_time);
  append_int64_field(e, kEventStep, step);
  append_bytes_field(e, kEventSummary, summary);
  return e;
}

std::string file_name(double wall_time, const std::string& host) {
  std::string h = host.empty() ? std::string("localhost") : host;
  for (char& c : h) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '-' || c == '_';
    if (!ok) c = '_';
  }
  const double secs = std::isfinite(wall_time) && wall_time > 0 ? std::floor(wall_time) : 0.0;
  return fmt::format("events.out.tfevents.{}.{}", static_cast<int64_t>(secs), h);
}

}  // namespace tfevents

namespace {

namespace fs = std::filesystem;

struct RankFile {
  double first_time = -1;  // the first event's wall time (-1: none yet)
  int64_t step = 0;        // the last STEP's step
  std::string records;     // after the file_version record
  uint64_t events = 0;
};

float mib(int64_t bytes) {
  return static_cast<float>(static_cast<double>(bytes) / (1024.0 * 1024.0));
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

bool is_rank_folder(const fs::path& p) {
  const std::string n = p.filename().string();
  if (n.size() < 5 || n.rfind("rank", 0) != 0) return false;
  for (size_t i = 4; i < n.size(); ++i)
    if (n[i] < '0' || n[i] > '9') return false;
  return true;
}

// Removes an earlier export's event files (DIR/rank<N>/events.out.tfevents.*).
void remove_earlier_export(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;
  for (const fs::directory_entry& sub : fs::directory_iterator(dir, ec)) {
    if (!sub.is_directory(ec) || !is_rank_folder(sub.path())) continue;
    for (const fs::directory_entry& f : fs::directory_iterator(sub.path(), ec)) {
      if (f.path().filename().string().rfind("events.out.tfevents.", 0) != 0) continue;
      std::error_code rm;
      fs::remove(f.path(), rm);
      SL_ENFORCE_T(IoError, !rm, "cannot remove the earlier export's {}: {}", f.path().string(),
                   rm.message());
    }
  }
}

void write_file(const fs::path& path, const std::string& head, const std::string& body) {
  const fs::path tmp = path.parent_path() / fmt::format(".writing.{}.tmp", ::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    SL_ENFORCE_T(IoError, out.good(), "cannot write {}", tmp.string());
    out.write(head.data(), static_cast<std::streamsize>(head.size()));
    out.write(body.data(), static_cast<std::streamsize>(body.size()));
    out.flush();
    if (!out.good()) {
      std::error_code ignored;
      fs::remove(tmp, ignored);
      SL_THROW(IoError, "writing {} failed (disk full?)", tmp.string());
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  SL_ENFORCE_T(IoError, !ec, "cannot rename {} to {}: {}", tmp.string(), path.string(),
               ec.message());
}

}  // namespace

TensorBoardExport write_tensorboard(const std::vector<Message>& messages, const std::string& dir) {
  using tfevents::Scalar;
  std::map<int, RankFile> ranks;
  // The same accounting as `export --csv` (write_step_csv): a step's account is the rank's open
  // one when its STEP arrives.
  TimeAccounting time;
  auto add = [](RankFile& f, double wall_time, int64_t step, const std::vector<Scalar>& values) {
    f.records += tfevents::record(tfevents::scalars_event(wall_time, step, values));
    ++f.events;
  };
  for (const Message& m : messages) {
    if (const auto* h = std::get_if<Hello>(&m)) {
      ranks[h->rank];
      continue;
    }
    const auto* e = std::get_if<telemetry::Event>(&m);
    if (e == nullptr) continue;
    RankFile& f = ranks[e->rank];
    if (f.first_time < 0) f.first_time = e->time;
    if (const auto* s = std::get_if<telemetry::StepEvent>(&e->payload)) {
      const StepAccount* a = time.open(e->rank);
      const StepAccount none;
      if (a == nullptr) a = &none;
      f.step = s->step;
      add(f, e->time, s->step,
          {{"train/loss", static_cast<float>(s->loss)},
           {"train/lr", static_cast<float>(s->lr)},
           {"train/grad_norm", static_cast<float>(s->grad_norm)},
           {"train/throughput", static_cast<float>(s->throughput)},
           {"time/step_seconds", static_cast<float>(s->step_seconds)},
           {"time/compute_seconds", static_cast<float>(a->compute)},
           {"time/comm_seconds", static_cast<float>(a->wait + a->transfer + a->unknown)},
           {"time/comm_wait_seconds", static_cast<float>(a->wait)}});
    } else if (const auto* ev = std::get_if<telemetry::EvalEvent>(&e->payload)) {
      add(f, e->time, ev->step,
          {{"eval/loss", static_cast<float>(ev->loss)},
           {"eval/accuracy", static_cast<float>(ev->accuracy)}});
    } else if (const auto* mem = std::get_if<telemetry::MemoryEvent>(&e->payload)) {
      std::vector<Scalar> values;
      int64_t total = 0;
      for (int c = 0; c < kMemCategories; ++c) total += mem->current[static_cast<size_t>(c)];
      values.push_back({"memory/total_mib", mib(total)});
      for (int c = 0; c < kMemCategories; ++c)
        values.push_back({fmt::format("memory/{}_mib", to_string(static_cast<MemCategory>(c))),
                          mib(mem->current[static_cast<size_t>(c)])});
      add(f, e->time, f.step, values);
    }
    time.add(*e, 1);
  }

  const fs::path root(dir);
  std::error_code ec;
  fs::create_directories(root, ec);
  SL_ENFORCE_T(IoError, !ec, "cannot create the TensorBoard folder {}: {}", dir, ec.message());
  remove_earlier_export(root);
  const std::string host = host_name();
  TensorBoardExport result;
  for (const auto& [rank, f] : ranks) {
    const fs::path sub = root / fmt::format("rank{}", rank);
    fs::create_directories(sub, ec);
    SL_ENFORCE_T(IoError, !ec, "cannot create {}: {}", sub.string(), ec.message());
    const double t0 = f.first_time >= 0 ? f.first_time : telemetry::now_seconds();
    const fs::path path = sub / tfevents::file_name(t0, host);
    write_file(path, tfevents::record(tfevents::file_version_event(t0)), f.records);
    result.files.push_back(path.string());
    result.events += f.events;
  }
  return result;
}

}  // namespace shardlab::net
