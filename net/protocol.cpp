#include "net/protocol.h"

#include <fmt/format.h>

#include <bit>
#include <cstddef>
#include <cstring>
#include <limits>
#include <type_traits>

#include "engine/core/error.h"

namespace shardlab::net {

// FrameHeader is documentation of the wire layout (and what tests pin); frames are written and
// read field by field with explicit little-endian byte order, never by copying the struct.
static_assert(offsetof(FrameHeader, magic) == 0);
static_assert(offsetof(FrameHeader, version) == 4);
static_assert(offsetof(FrameHeader, type) == 6);
static_assert(offsetof(FrameHeader, length) == 8);
static_assert(sizeof(double) == 8 && std::numeric_limits<double>::is_iec559,
              "f64 on the wire is an IEEE 754 binary64");

const char* to_string(MessageType type) {
  switch (type) {
    case MessageType::hello:
      return "hello";
    case MessageType::challenge:
      return "challenge";
    case MessageType::auth:
      return "auth";
    case MessageType::auth_ok:
      return "auth_ok";
    case MessageType::batch_mac:
      return "batch_mac";
    case MessageType::step:
      return "step";
    case MessageType::memory:
      return "memory";
    case MessageType::collective:
      return "collective";
    case MessageType::phase:
      return "phase";
    case MessageType::heartbeat:
      return "heartbeat";
    case MessageType::log:
      return "log";
    case MessageType::job_state:
      return "job_state";
    case MessageType::eval:
      return "eval";
    case MessageType::layout:
      return "layout";
  }
  return "unknown";
}

namespace {

bool known_type(uint16_t t) {
  return (t >= 1 && t <= 5) || (t >= 16 && t <= 24);
}

// ---------------------------------------------------------------------------------------------
// Encoding

class Writer {
 public:
  explicit Writer(std::vector<uint8_t>& out) : out_(out) {}

  template <typename U>
  void uint(U v) {
    static_assert(std::is_unsigned_v<U>);
    for (size_t i = 0; i < sizeof(U); ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  void u8(uint8_t v) { out_.push_back(v); }
  void u16(uint16_t v) { uint(v); }
  void u32(uint32_t v) { uint(v); }
  void u64(uint64_t v) { uint(v); }
  void i32(int32_t v) { uint(static_cast<uint32_t>(v)); }
  void i64(int64_t v) { uint(static_cast<uint64_t>(v)); }
  void f64(double v) { uint(std::bit_cast<uint64_t>(v)); }
  void boolean(bool v) { u8(v ? 1 : 0); }
  void bytes(std::span<const uint8_t> b) { out_.insert(out_.end(), b.begin(), b.end()); }
  void str(const std::string& s, const char* field) {
    SL_ENFORCE(s.size() <= kMaxString,
               "telemetry string '{}' of {} bytes exceeds the protocol limit of {} bytes", field,
               s.size(), kMaxString);
    u32(static_cast<uint32_t>(s.size()));
    out_.insert(out_.end(), s.begin(), s.end());
  }

 private:
  std::vector<uint8_t>& out_;
};

template <class... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;

MessageType type_of(const telemetry::Payload& payload) {
  return std::visit(Overloaded{
                        [](const telemetry::StepEvent&) { return MessageType::step; },
                        [](const telemetry::MemoryEvent&) { return MessageType::memory; },
                        [](const telemetry::CollectiveEvent&) { return MessageType::collective; },
                        [](const telemetry::PhaseEvent&) { return MessageType::phase; },
                        [](const telemetry::HeartbeatEvent&) { return MessageType::heartbeat; },
                        [](const telemetry::LogLineEvent&) { return MessageType::log; },
                        [](const telemetry::JobStateEvent&) { return MessageType::job_state; },
                        [](const telemetry::EvalEvent&) { return MessageType::eval; },
                        [](const telemetry::LayoutEvent&) { return MessageType::layout; },
                    },
                    payload);
}

MessageType type_of(const Message& message) {
  return std::visit(Overloaded{
                        [](const Hello&) { return MessageType::hello; },
                        [](const Challenge&) { return MessageType::challenge; },
                        [](const Auth&) { return MessageType::auth; },
                        [](const AuthOk&) { return MessageType::auth_ok; },
                        [](const BatchMac&) { return MessageType::batch_mac; },
                        [](const telemetry::Event& e) { return type_of(e.payload); },
                    },
                    message);
}

void write_ranges(Writer& w, const std::vector<telemetry::LayoutRange>& ranges, const char* field) {
  SL_ENFORCE(ranges.size() <= telemetry::kMaxLayoutRanges,
             "layout list '{}' of {} ranges exceeds the limit of {}", field, ranges.size(),
             telemetry::kMaxLayoutRanges);
  w.u32(static_cast<uint32_t>(ranges.size()));
  for (const telemetry::LayoutRange& r : ranges) {
    w.i64(r.begin);
    w.i64(r.end);
  }
}

void write_layout(Writer& w, const telemetry::LayoutEvent& l, uint16_t version) {
  w.str(l.strategy, "strategy");
  w.i64(l.bytes_per_element);
  w.u32(static_cast<uint32_t>(l.tensors.size()));
  for (const telemetry::LayoutTensor& t : l.tensors) {
    w.str(t.name, "tensor name");
    w.i64(t.offset);
    w.i64(t.size);
  }
  write_ranges(w, l.params, "params");
  write_ranges(w, l.grads, "grads");
  write_ranges(w, l.optimizer_state, "optimizer_state");
  w.u32(static_cast<uint32_t>(l.state_arrays.size()));
  for (const std::string& a : l.state_arrays) w.str(a, "state array");
  w.i64(l.params_padding);
  w.i64(l.grads_padding);
  w.i64(l.state_padding);
  for (int64_t b : l.planned) w.i64(b);
  w.str(l.formula, "formula");
  w.boolean(l.truncated);
  if (version < 5) return;  // version 4 knew no units
  size_t total = 0;
  for (const auto& unit : l.units) total += unit.size();
  SL_ENFORCE(total <= telemetry::kMaxLayoutRanges,
             "layout units of {} ranges in all exceed the limit of {}", total,
             telemetry::kMaxLayoutRanges);
  w.u32(static_cast<uint32_t>(l.units.size()));
  for (const auto& unit : l.units) write_ranges(w, unit, "units");
}

void write_payload(Writer& w, const telemetry::Payload& payload, uint16_t version) {
  std::visit(Overloaded{
                 [&](const telemetry::StepEvent& s) {
                   w.i64(s.step);
                   w.f64(s.loss);
                   w.f64(s.lr);
                   w.f64(s.grad_norm);
                   w.f64(s.throughput);
                   w.boolean(s.tokens);
                   w.f64(s.step_seconds);
                 },
                 [&](const telemetry::MemoryEvent& m) {
                   for (int64_t v : m.current) w.i64(v);
                   for (int64_t v : m.peak) w.i64(v);
                 },
                 [&](const telemetry::CollectiveEvent& c) {
                   w.str(c.op, "op");
                   w.str(c.group, "group");
                   w.i64(c.bytes);
                   w.f64(c.start);
                   w.f64(c.duration);
                   w.f64(c.algbw);
                   w.f64(c.busbw);
                   w.u64(c.seq);
                   w.boolean(c.ok);
                   w.f64(c.wait);
                   w.i32(c.last_rank);
                   if (version >= 5) {
                     const auto array = static_cast<uint8_t>(c.array);
                     SL_ENFORCE(array <= static_cast<uint8_t>(telemetry::CollectiveArray::grads),
                                "collective array {} is out of range", array);
                     w.u8(array);
                     w.i32(c.unit);
                   }
                 },
                 [&](const telemetry::PhaseEvent& p) {
                   const auto phase = static_cast<uint8_t>(p.phase);
                   SL_ENFORCE(phase <= static_cast<uint8_t>(telemetry::Phase::optimizer),
                              "phase {} is out of range", phase);
                   w.i32(p.stage);
                   w.i32(p.micro_batch);
                   w.u8(phase);
                   w.f64(p.start);
                   w.f64(p.end);
                 },
                 [&](const telemetry::HeartbeatEvent&) {},
                 [&](const telemetry::LogLineEvent& l) { w.str(l.text, "text"); },
                 [&](const telemetry::JobStateEvent& j) {
                   const auto state = static_cast<uint8_t>(j.state);
                   SL_ENFORCE(state <= static_cast<uint8_t>(telemetry::JobState::failed),
                              "job state {} is out of range", state);
                   w.u8(state);
                   w.str(j.reason, "reason");
                 },
                 [&](const telemetry::EvalEvent& e) {
                   w.i64(e.step);
                   w.f64(e.loss);
                   w.f64(e.accuracy);
                   w.i64(e.samples);
                 },
                 [&](const telemetry::LayoutEvent& l) { write_layout(w, l, version); },
             },
             payload);
}

void write_message(Writer& w, const Message& message, uint16_t version) {
  std::visit(Overloaded{
                 [&](const Hello& h) {
                   w.u16(h.version);
                   w.str(h.job_id, "job_id");
                   w.i32(h.rank);
                   w.i32(h.world);
                   w.i32(h.pp);
                   w.i32(h.tp);
                   w.i32(h.dp);
                   w.i32(h.pp_i);
                   w.i32(h.tp_i);
                   w.i32(h.dp_i);
                   w.str(h.host, "host");
                   w.i64(h.pid);
                   w.u16(h.min_version);
                   w.bytes(h.nonce);
                 },
                 [&](const Challenge& c) {
                   w.u16(c.version);
                   w.bytes(c.nonce);
                   w.bytes(c.proof);
                 },
                 [&](const Auth& a) { w.bytes(a.mac); },
                 [&](const AuthOk&) {},
                 [&](const BatchMac& b) { w.bytes(b.mac); },
                 [&](const telemetry::Event& e) {
                   w.i32(e.rank);
                   w.u64(e.seq);
                   w.f64(e.time);
                   write_payload(w, e.payload, version);
                 },
             },
             message);
}

// ---------------------------------------------------------------------------------------------
// Decoding. The reader never throws (the decoder is fuzzed and sits on the network path): the
// first problem is recorded and every later read returns zeros.

uint64_t load_le(const uint8_t* p, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

class Reader {
 public:
  Reader(std::span<const uint8_t> bytes, const char* what) : b_(bytes), what_(what) {}

  bool failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }
  size_t remaining() const { return b_.size() - pos_; }

  uint8_t u8(const char* field) { return static_cast<uint8_t>(take(1, field)); }
  uint16_t u16(const char* field) { return static_cast<uint16_t>(take(2, field)); }
  uint32_t u32(const char* field) { return static_cast<uint32_t>(take(4, field)); }
  uint64_t u64(const char* field) { return take(8, field); }
  int32_t i32(const char* field) { return static_cast<int32_t>(u32(field)); }
  int64_t i64(const char* field) { return static_cast<int64_t>(u64(field)); }
  double f64(const char* field) { return std::bit_cast<double>(u64(field)); }

  bool boolean(const char* field) {
    const size_t at = pos_;
    const uint8_t v = u8(field);
    if (!failed() && v > 1)
      fail(fmt::format("bad bool byte 0x{:02x} for '{}' at payload offset {}", v, field, at));
    return v == 1;
  }

  template <size_t N>
  void bytes(std::array<uint8_t, N>& out, const char* field) {
    if (!need(N, field)) return;
    std::memcpy(out.data(), b_.data() + pos_, N);
    pos_ += N;
  }

  std::string str(const char* field) {
    const uint32_t n = u32(field);
    if (failed()) return {};
    if (n > kMaxString) {
      fail(fmt::format("string '{}' of {} bytes exceeds the limit of {} bytes", field, n,
                       kMaxString));
      return {};
    }
    if (n > remaining()) {
      fail(fmt::format("string '{}' of {} bytes runs past the end of the payload ({} bytes left)",
                       field, n, remaining()));
      return {};
    }
    std::string s(reinterpret_cast<const char*>(b_.data() + pos_), n);
    pos_ += n;
    return s;
  }

  void fail(std::string message) {
    if (error_.empty()) error_ = fmt::format("{} payload: {}", what_, message);
  }

  // Called after the last field: the payload must have been consumed exactly.
  void finish() {
    if (!failed() && remaining() != 0)
      fail(fmt::format("{} trailing bytes after the last field", remaining()));
  }

 private:
  bool need(size_t n, const char* field) {
    if (failed()) return false;
    if (remaining() < n) {
      fail(fmt::format("truncated at '{}' (needs {} bytes at offset {}, {} left)", field, n, pos_,
                       remaining()));
      return false;
    }
    return true;
  }
  uint64_t take(size_t n, const char* field) {
    if (!need(n, field)) return 0;
    const uint64_t v = load_le(b_.data() + pos_, n);
    pos_ += n;
    return v;
  }

  std::span<const uint8_t> b_;
  size_t pos_ = 0;
  const char* what_;
  std::string error_;
};

Hello read_hello(Reader& r, uint16_t version) {
  Hello h;
  h.version = r.u16("version");
  h.job_id = r.str("job_id");
  h.rank = r.i32("rank");
  h.world = r.i32("world");
  h.pp = r.i32("pp");
  h.tp = r.i32("tp");
  h.dp = r.i32("dp");
  h.pp_i = r.i32("pp_i");
  h.tp_i = r.i32("tp_i");
  h.dp_i = r.i32("dp_i");
  h.host = r.str("host");
  h.pid = r.i64("pid");
  if (version >= 3) {
    h.min_version = r.u16("min_version");
    r.bytes(h.nonce, "nonce");
  } else {  // a worker of version 1 or 2 spoke exactly one version and sent no nonce
    h.min_version = h.version;
  }
  return h;
}

// A list's count, when `count` items of at least `each` bytes fit in what is left (else the reader
// fails and 0 comes back): a hostile count never makes the reader allocate.
uint32_t read_count(Reader& r, size_t each, const char* field) {
  const uint32_t n = r.u32(field);
  if (r.failed()) return 0;
  if (n > r.remaining() / each) {
    r.fail(fmt::format("list '{}' of {} items runs past the end of the payload ({} bytes left)",
                       field, n, r.remaining()));
    return 0;
  }
  return n;
}

std::vector<telemetry::LayoutRange> read_ranges(Reader& r, const char* field) {
  std::vector<telemetry::LayoutRange> out;
  const uint32_t n = read_count(r, 16, field);
  if (n > telemetry::kMaxLayoutRanges) {
    r.fail(fmt::format("list '{}' of {} ranges exceeds the limit of {}", field, n,
                       telemetry::kMaxLayoutRanges));
    return out;
  }
  out.reserve(n);
  for (uint32_t i = 0; i < n && !r.failed(); ++i) {
    telemetry::LayoutRange x;
    x.begin = r.i64(field);
    x.end = r.i64(field);
    if (!r.failed() && (x.begin < 0 || x.end < x.begin))
      r.fail(
          fmt::format("range [{}, {}) of '{}' is not a range of indices", x.begin, x.end, field));
    out.push_back(x);
  }
  return out;
}

telemetry::LayoutEvent read_layout(Reader& r, uint16_t version) {
  telemetry::LayoutEvent l;
  l.strategy = r.str("strategy");
  l.bytes_per_element = r.i64("bytes_per_element");
  const uint32_t tensors = read_count(r, 20, "tensors");
  l.tensors.reserve(tensors);
  for (uint32_t i = 0; i < tensors && !r.failed(); ++i) {
    telemetry::LayoutTensor t;
    t.name = r.str("tensor name");
    t.offset = r.i64("tensor offset");
    t.size = r.i64("tensor size");
    l.tensors.push_back(std::move(t));
  }
  l.params = read_ranges(r, "params");
  l.grads = read_ranges(r, "grads");
  l.optimizer_state = read_ranges(r, "optimizer_state");
  const uint32_t arrays = read_count(r, 4, "state_arrays");
  for (uint32_t i = 0; i < arrays && !r.failed(); ++i)
    l.state_arrays.push_back(r.str("state array"));
  l.params_padding = r.i64("params_padding");
  l.grads_padding = r.i64("grads_padding");
  l.state_padding = r.i64("state_padding");
  for (auto& b : l.planned) b = r.i64("planned");
  l.formula = r.str("formula");
  l.truncated = r.boolean("truncated");
  if (version < 5 || r.failed()) return l;  // version 4 knew no units
  const uint32_t units = read_count(r, 4, "units");
  size_t total = 0;
  for (uint32_t i = 0; i < units && !r.failed(); ++i) {
    l.units.push_back(read_ranges(r, "units"));
    total += l.units.back().size();
    if (total > telemetry::kMaxLayoutRanges)
      r.fail(
          fmt::format("layout units of more than {} ranges in all", telemetry::kMaxLayoutRanges));
  }
  return l;
}

telemetry::Payload read_event_payload(Reader& r, MessageType type, uint16_t version) {
  switch (type) {
    case MessageType::step: {
      telemetry::StepEvent s;
      s.step = r.i64("step");
      s.loss = r.f64("loss");
      s.lr = r.f64("lr");
      s.grad_norm = r.f64("grad_norm");
      s.throughput = r.f64("throughput");
      s.tokens = r.boolean("tokens");
      s.step_seconds = r.f64("step_seconds");
      return s;
    }
    case MessageType::memory: {
      telemetry::MemoryEvent m;
      for (auto& v : m.current) v = r.i64("current");
      for (auto& v : m.peak) v = r.i64("peak");
      return m;
    }
    case MessageType::collective: {
      telemetry::CollectiveEvent c;
      c.op = r.str("op");
      c.group = r.str("group");
      c.bytes = r.i64("bytes");
      c.start = r.f64("start");
      c.duration = r.f64("duration");
      c.algbw = r.f64("algbw");
      c.busbw = r.f64("busbw");
      c.seq = r.u64("seq");
      c.ok = r.boolean("ok");
      if (version >= 2) {  // version 1 knew no waits: they stay unknown (-1)
        c.wait = r.f64("wait");
        c.last_rank = r.i32("last_rank");
      }
      if (version >= 5) {  // before, what a collective moved was not said (unknown, -1)
        const uint8_t array = r.u8("array");
        if (!r.failed() && array > static_cast<uint8_t>(telemetry::CollectiveArray::grads))
          r.fail(fmt::format("collective array {} out of range (0..{})", array,
                             static_cast<int>(telemetry::CollectiveArray::grads)));
        c.array = static_cast<telemetry::CollectiveArray>(array);
        c.unit = r.i32("unit");
      }
      return c;
    }
    case MessageType::phase: {
      telemetry::PhaseEvent p;
      p.stage = r.i32("stage");
      p.micro_batch = r.i32("micro_batch");
      const uint8_t phase = r.u8("phase");
      if (!r.failed() && phase > static_cast<uint8_t>(telemetry::Phase::optimizer))
        r.fail(fmt::format("phase {} out of range (0..{})", phase,
                           static_cast<int>(telemetry::Phase::optimizer)));
      p.phase = static_cast<telemetry::Phase>(phase);
      p.start = r.f64("start");
      p.end = r.f64("end");
      return p;
    }
    case MessageType::heartbeat:
      return telemetry::HeartbeatEvent{};
    case MessageType::log:
      return telemetry::LogLineEvent{r.str("text")};
    case MessageType::job_state: {
      telemetry::JobStateEvent j;
      const uint8_t state = r.u8("state");
      if (!r.failed() && state > static_cast<uint8_t>(telemetry::JobState::failed))
        r.fail(fmt::format("job state {} out of range (0..{})", state,
                           static_cast<int>(telemetry::JobState::failed)));
      j.state = static_cast<telemetry::JobState>(state);
      j.reason = r.str("reason");
      return j;
    }
    case MessageType::eval: {
      telemetry::EvalEvent e;
      e.step = r.i64("step");
      e.loss = r.f64("loss");
      e.accuracy = r.f64("accuracy");
      e.samples = r.i64("samples");
      return e;
    }
    case MessageType::layout:
      if (version < 4) {
        r.fail(fmt::format("a layout event needs protocol version 4 (the frame says {})", version));
        return telemetry::HeartbeatEvent{};
      }
      return read_layout(r, version);
    default:
      break;
  }
  r.fail("not an event type");
  return telemetry::HeartbeatEvent{};
}

Message read_message(Reader& r, MessageType type, uint16_t version) {
  switch (type) {
    case MessageType::hello:
      return read_hello(r, version);
    case MessageType::challenge: {
      Challenge c;
      c.version = version;
      if (version >= 3) c.version = r.u16("version");
      r.bytes(c.nonce, "nonce");
      if (version >= 3) r.bytes(c.proof, "proof");
      return c;
    }
    case MessageType::auth: {
      Auth a;
      r.bytes(a.mac, "mac");
      return a;
    }
    case MessageType::auth_ok:
      return AuthOk{};
    case MessageType::batch_mac: {
      BatchMac b;
      r.bytes(b.mac, "mac");
      return b;
    }
    default: {
      telemetry::Event e;
      e.rank = r.i32("rank");
      e.seq = r.u64("seq");
      e.time = r.f64("time");
      e.payload = read_event_payload(r, type, version);
      return e;
    }
  }
}

DecodeResult error_result(std::string message) {
  DecodeResult r;
  r.status = DecodeResult::Status::error;
  r.error = std::move(message);
  return r;
}

// The version a message's frame needs at least: a layout event came with version 4.
uint16_t oldest_version_for(const Message& message) {
  const auto* e = std::get_if<telemetry::Event>(&message);
  return e && std::holds_alternative<telemetry::LayoutEvent>(e->payload) ? 4 : kOldestLiveVersion;
}

}  // namespace

bool speaks(const Message& message, uint16_t version) {
  return version >= oldest_version_for(message);
}

void encode_into(const Message& message, std::vector<uint8_t>& out, uint16_t version) {
  SL_ENFORCE(version >= kOldestLiveVersion && version <= kProtocolVersion,
             "cannot encode protocol version {} (this build writes {} to {})", version,
             kOldestLiveVersion, kProtocolVersion);
  SL_ENFORCE(speaks(message, version), "a {} message needs protocol version {}, not {}",
             to_string(type_of(message)), oldest_version_for(message), version);
  // A HELLO's header carries the lowest version the worker speaks, so that any collector that
  // speaks that one reads it.
  // (Versions 3 on only: older HELLOs had another payload, which this one is not.)
  if (const auto* h = std::get_if<Hello>(&message);
      h && h->min_version >= kOldestLiveVersion && h->min_version < version)
    version = h->min_version;
  const size_t start = out.size();
  try {
    Writer w(out);
    w.u32(kMagic);
    w.u16(version);
    w.u16(static_cast<uint16_t>(type_of(message)));
    w.u32(0);  // length, patched below
    write_message(w, message, version);
  } catch (...) {
    out.resize(start);  // leave `out` as it was: no half frame in a batch
    throw;
  }
  const size_t length = out.size() - start - kHeaderSize;
  for (size_t i = 0; i < 4; ++i)
    out[start + 8 + i] = static_cast<uint8_t>(static_cast<uint32_t>(length) >> (8 * i));
}

std::vector<uint8_t> encode(const Message& message, uint16_t version) {
  std::vector<uint8_t> out;
  encode_into(message, out, version);
  return out;
}

DecodeResult decode_frame(std::span<const uint8_t> bytes, uint32_t max_payload) {
  // Reject a bad magic as soon as its first byte is in: a stream that starts wrong never
  // becomes valid, and the receiver should not wait for more of it.
  const size_t magic_seen = bytes.size() < 4 ? bytes.size() : 4;
  for (size_t i = 0; i < magic_seen; ++i) {
    const auto expected = static_cast<uint8_t>(kMagic >> (8 * i));
    if (bytes[i] == expected) continue;
    if (magic_seen == 4)
      return error_result(fmt::format("bad magic 0x{:08X} (expected 0x{:08X}, bytes \"SLTM\")",
                                      load_le(bytes.data(), 4), kMagic));
    return error_result(fmt::format("bad magic: byte {} is 0x{:02x}, expected 0x{:02x} (\"SLTM\")",
                                    i, bytes[i], expected));
  }
  if (bytes.size() >= 6) {
    const auto version = static_cast<uint16_t>(load_le(bytes.data() + 4, 2));
    if (version < kOldestProtocolVersion || version > kProtocolVersion)
      return error_result(
          fmt::format("unsupported protocol version {} (this build speaks {}, "
                      "and reads {} to {})",
                      version, kProtocolVersion, kOldestProtocolVersion, kProtocolVersion));
  }
  if (bytes.size() >= 8) {
    const auto type = static_cast<uint16_t>(load_le(bytes.data() + 6, 2));
    if (!known_type(type)) return error_result(fmt::format("unknown message type {}", type));
  }
  if (bytes.size() < kHeaderSize) return {};

  const auto type = static_cast<MessageType>(load_le(bytes.data() + 6, 2));
  const auto length = static_cast<uint32_t>(load_le(bytes.data() + 8, 4));
  if (length > max_payload)
    return error_result(fmt::format("{} payload of {} bytes exceeds the limit of {} bytes",
                                    to_string(type), length, max_payload));
  // Compare without adding to the size: no overflow whatever `length` says.
  if (bytes.size() - kHeaderSize < length) return {};

  Reader reader(bytes.subspan(kHeaderSize, length), to_string(type));
  const auto version = static_cast<uint16_t>(load_le(bytes.data() + 4, 2));
  Message message = read_message(reader, type, version);
  reader.finish();
  if (reader.failed()) return error_result(reader.error());

  DecodeResult result;
  result.status = DecodeResult::Status::ok;
  result.consumed = kHeaderSize + length;
  result.message = std::move(message);
  return result;
}

}  // namespace shardlab::net
