// The telemetry wire protocol: every message kind survives encode -> decode bit for bit, frames
// batched with encode_into come back in order, every strict prefix of a frame asks for more,
// malformed frames are rejected with a reason that names the problem, and the decoder neither
// crashes, over-reads nor over-allocates on random or mutated bytes.
#include <QtTest>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "net/protocol.h"

using namespace shardlab;
using namespace shardlab::net;
namespace tel = shardlab::telemetry;

// --- Allocation tracking: proves that a huge length field is never turned into an allocation. ---
namespace {
bool g_track = false;
size_t g_largest = 0;
}  // namespace

void* operator new(size_t size) {
  if (g_track && size > g_largest) g_largest = size;
  if (void* p = std::malloc(size ? size : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, size_t) noexcept {
  std::free(p);
}

// The wire layout of the header, pinned.
static_assert(sizeof(FrameHeader) == 12);
static_assert(offsetof(FrameHeader, magic) == 0);
static_assert(offsetof(FrameHeader, version) == 4);
static_assert(offsetof(FrameHeader, type) == 6);
static_assert(offsetof(FrameHeader, length) == 8);
static_assert(alignof(FrameHeader) == 1);
static_assert(kHeaderSize == sizeof(FrameHeader));

namespace {

using Status = DecodeResult::Status;
constexpr size_t kEventPrefix = 4 + 8 + 8;  // i32 rank, u64 seq, f64 time

uint64_t bits(double v) {
  return std::bit_cast<uint64_t>(v);
}

tel::Event make_event(tel::Payload payload) {
  tel::Event e;
  e.rank = -123456;
  e.seq = 0xFEDCBA9876543210ull;
  e.time = 1.7e9 + 0.123456789;
  e.payload = std::move(payload);
  return e;
}

// Who holds what on rank 1 of a zero2 job on 4 ranks over two tensors of 10 and 6 elements.
tel::LayoutEvent sample_layout() {
  tel::LayoutEvent l;
  l.strategy = "zero2";
  l.tensors = {{"fc1.weight", 0, 10}, {"fc1.bias \xc3\xa9", 10, 6}};
  l.params = {{0, 16}};
  l.grads = {{4, 8}};
  l.optimizer_state = {{4, 8}, {0x1'0000'0000LL, 0x1'0000'0001LL}};
  l.state_arrays = {"exp_avg", "exp_avg_sq"};
  l.bytes_per_element = 4;
  l.params_padding = 0;
  l.grads_padding = -1;  // not a figure a rank sends, but the wire keeps what it is given
  l.state_padding = 3;
  l.planned = {64, 16, -(int64_t{1} << 40)};
  l.formula = "zero2: 4*Psi' + 4*Psi'/N + 8*Psi'/N";
  l.truncated = true;
  l.units = {{{0, 8}}, {}, {{8, 16}, {0x1'0000'0000LL, 0x1'0000'0001LL}}};
  return l;
}

// One of every message kind (two of some), with values that catch byte-order, sign and width
// mistakes: negatives, values above 2^32, every bit of a double (NaN payload, -0, infinities).
std::vector<Message> samples() {
  std::vector<Message> out;
  Hello h;
  h.version = 0x0102;
  h.job_id = "gpt-3d \xc3\xa9t\xc3\xa9 #7";
  h.rank = 37;
  h.world = 64;
  h.pp = 4;
  h.tp = 2;
  h.dp = 8;
  h.pp_i = 3;
  h.tp_i = 1;
  h.dp_i = 5;
  h.host = std::string("node-17\0x", 9);  // embedded NUL
  h.pid = -0x123456789AB;
  h.min_version = 0x0201;
  for (size_t i = 0; i < h.nonce.size(); ++i) h.nonce[i] = static_cast<uint8_t>(i * 11 + 1);
  out.push_back(h);

  Challenge c;
  c.version = 0x0304;
  for (size_t i = 0; i < c.nonce.size(); ++i) c.nonce[i] = static_cast<uint8_t>(0xF0 ^ (i * 7));
  for (size_t i = 0; i < c.proof.size(); ++i) c.proof[i] = static_cast<uint8_t>(0x0F ^ (i * 5));
  out.push_back(c);
  Auth a;
  for (size_t i = 0; i < a.mac.size(); ++i) a.mac[i] = static_cast<uint8_t>(255 - i * 3);
  out.push_back(a);
  out.push_back(AuthOk{});
  BatchMac b;
  for (size_t i = 0; i < b.mac.size(); ++i) b.mac[i] = static_cast<uint8_t>(i * 13 + 7);
  out.push_back(b);

  tel::StepEvent s;
  s.step = 0x1'0000'0007;
  s.loss = 2.718281828459045;
  s.lr = -3e-4;
  s.grad_norm = std::numeric_limits<double>::infinity();
  s.throughput = 12345.678;
  s.tokens = true;
  s.step_seconds = 5e-324;  // denormal
  out.push_back(make_event(s));
  s.tokens = false;
  s.loss = std::bit_cast<double>(0x7FF8'0000'DEAD'BEEFull);  // NaN with a payload
  s.lr = -0.0;
  out.push_back(make_event(s));

  tel::MemoryEvent m;
  for (size_t i = 0; i < m.current.size(); ++i) {
    m.current[i] = static_cast<int64_t>(i + 1) * 1'000'000'007LL;
    m.peak[i] = -static_cast<int64_t>(i) - (int64_t{1} << 40);
  }
  out.push_back(make_event(m));

  tel::CollectiveEvent col;
  col.op = "all_reduce";
  col.group = "tp[1]";
  col.bytes = 0x7FFF'FFFF'FFFF'FFFFLL;
  col.start = 1.7e9;
  col.duration = 1.25e-5;
  col.algbw = 98.5;
  col.busbw = 172.375;
  col.seq = 0xFFFF'FFFF'FFFF'FFFEull;
  col.ok = false;
  col.wait = 3.5e-6;
  col.last_rank = 1023;
  col.array = tel::CollectiveArray::grads;
  col.unit = -0x7FFF'FFFF;
  out.push_back(make_event(col));

  tel::PhaseEvent p;
  p.stage = 3;
  p.micro_batch = -2;
  p.phase = tel::Phase::backward;
  p.start = 10.5;
  p.end = -std::numeric_limits<double>::infinity();
  out.push_back(make_event(p));
  tel::PhaseEvent opt;
  opt.micro_batch = -1;
  opt.phase = tel::Phase::optimizer;
  opt.start = 1.7e9;
  opt.end = 1.7e9 + 0.003;
  out.push_back(make_event(opt));

  tel::EvalEvent ev;
  ev.step = 0x7FFF'FFFF'FFFFLL;
  ev.loss = 2.6875;
  ev.accuracy = 0.2625;
  ev.samples = -7;
  out.push_back(make_event(ev));

  out.push_back(make_event(tel::HeartbeatEvent{}));
  out.push_back(make_event(tel::LogLineEvent{"rank 37: loss 2.71 \xe2\x9c\x93"}));
  out.push_back(make_event(tel::LogLineEvent{""}));
  out.push_back(make_event(tel::JobStateEvent{tel::JobState::failed, "NCCL timeout on tp[1]"}));
  out.push_back(make_event(tel::JobStateEvent{tel::JobState::running, ""}));
  out.push_back(make_event(sample_layout()));
  tel::LayoutEvent empty;  // a rank of a model with no parameters, nothing known
  empty.bytes_per_element = 0;
  out.push_back(make_event(empty));
  return out;
}

MessageType type_of(const Message& m) {
  // Independent of the encoder: the header's type field is checked against this.
  if (std::holds_alternative<Hello>(m)) return MessageType::hello;
  if (std::holds_alternative<Challenge>(m)) return MessageType::challenge;
  if (std::holds_alternative<Auth>(m)) return MessageType::auth;
  if (std::holds_alternative<AuthOk>(m)) return MessageType::auth_ok;
  if (std::holds_alternative<BatchMac>(m)) return MessageType::batch_mac;
  static constexpr MessageType kEvents[] = {
      MessageType::step,      MessageType::memory,    MessageType::collective,
      MessageType::phase,     MessageType::heartbeat, MessageType::log,
      MessageType::job_state, MessageType::eval,      MessageType::layout};
  return kEvents[std::get<tel::Event>(m).payload.index()];
}

// Field-by-field comparison; doubles compared by their bits.
void compare(const Message& got, const Message& want) {
  QCOMPARE(got.index(), want.index());
  if (const auto* w = std::get_if<Hello>(&want)) {
    const auto& g = std::get<Hello>(got);
    QCOMPARE(g.version, w->version);
    QCOMPARE(g.job_id, w->job_id);
    QCOMPARE(g.rank, w->rank);
    QCOMPARE(g.world, w->world);
    QCOMPARE(g.pp, w->pp);
    QCOMPARE(g.tp, w->tp);
    QCOMPARE(g.dp, w->dp);
    QCOMPARE(g.pp_i, w->pp_i);
    QCOMPARE(g.tp_i, w->tp_i);
    QCOMPARE(g.dp_i, w->dp_i);
    QCOMPARE(g.host, w->host);
    QCOMPARE(g.pid, w->pid);
    QCOMPARE(g.min_version, w->min_version);
    QVERIFY(g.nonce == w->nonce);
  } else if (const auto* w = std::get_if<Challenge>(&want)) {
    QCOMPARE(std::get<Challenge>(got).version, w->version);
    QVERIFY(std::get<Challenge>(got).nonce == w->nonce);
    QVERIFY(std::get<Challenge>(got).proof == w->proof);
  } else if (const auto* w = std::get_if<BatchMac>(&want)) {
    QVERIFY(std::get<BatchMac>(got).mac == w->mac);
  } else if (const auto* w = std::get_if<Auth>(&want)) {
    QVERIFY(std::get<Auth>(got).mac == w->mac);
  } else if (std::holds_alternative<AuthOk>(want)) {
    // nothing to compare
  } else {
    const auto& we = std::get<tel::Event>(want);
    const auto& ge = std::get<tel::Event>(got);
    QCOMPARE(ge.rank, we.rank);
    QCOMPARE(ge.seq, we.seq);
    QCOMPARE(bits(ge.time), bits(we.time));
    QCOMPARE(ge.payload.index(), we.payload.index());
    if (const auto* w = std::get_if<tel::StepEvent>(&we.payload)) {
      const auto& g = std::get<tel::StepEvent>(ge.payload);
      QCOMPARE(g.step, w->step);
      QCOMPARE(bits(g.loss), bits(w->loss));
      QCOMPARE(bits(g.lr), bits(w->lr));
      QCOMPARE(bits(g.grad_norm), bits(w->grad_norm));
      QCOMPARE(bits(g.throughput), bits(w->throughput));
      QCOMPARE(g.tokens, w->tokens);
      QCOMPARE(bits(g.step_seconds), bits(w->step_seconds));
    } else if (const auto* w = std::get_if<tel::MemoryEvent>(&we.payload)) {
      const auto& g = std::get<tel::MemoryEvent>(ge.payload);
      QVERIFY(g.current == w->current);
      QVERIFY(g.peak == w->peak);
    } else if (const auto* w = std::get_if<tel::CollectiveEvent>(&we.payload)) {
      const auto& g = std::get<tel::CollectiveEvent>(ge.payload);
      QCOMPARE(g.op, w->op);
      QCOMPARE(g.group, w->group);
      QCOMPARE(g.bytes, w->bytes);
      QCOMPARE(bits(g.start), bits(w->start));
      QCOMPARE(bits(g.duration), bits(w->duration));
      QCOMPARE(bits(g.algbw), bits(w->algbw));
      QCOMPARE(bits(g.busbw), bits(w->busbw));
      QCOMPARE(g.seq, w->seq);
      QCOMPARE(g.ok, w->ok);
      QCOMPARE(bits(g.wait), bits(w->wait));
      QCOMPARE(g.last_rank, w->last_rank);
      QCOMPARE(g.array, w->array);
      QCOMPARE(g.unit, w->unit);
    } else if (const auto* w = std::get_if<tel::PhaseEvent>(&we.payload)) {
      const auto& g = std::get<tel::PhaseEvent>(ge.payload);
      QCOMPARE(g.stage, w->stage);
      QCOMPARE(g.micro_batch, w->micro_batch);
      QCOMPARE(g.phase, w->phase);
      QCOMPARE(bits(g.start), bits(w->start));
      QCOMPARE(bits(g.end), bits(w->end));
    } else if (const auto* w = std::get_if<tel::LogLineEvent>(&we.payload)) {
      QCOMPARE(std::get<tel::LogLineEvent>(ge.payload).text, w->text);
    } else if (const auto* w = std::get_if<tel::JobStateEvent>(&we.payload)) {
      const auto& g = std::get<tel::JobStateEvent>(ge.payload);
      QCOMPARE(g.state, w->state);
      QCOMPARE(g.reason, w->reason);
    } else if (const auto* w = std::get_if<tel::EvalEvent>(&we.payload)) {
      const auto& g = std::get<tel::EvalEvent>(ge.payload);
      QCOMPARE(g.step, w->step);
      QCOMPARE(bits(g.loss), bits(w->loss));
      QCOMPARE(bits(g.accuracy), bits(w->accuracy));
      QCOMPARE(g.samples, w->samples);
    } else if (const auto* w = std::get_if<tel::LayoutEvent>(&we.payload)) {
      const auto& g = std::get<tel::LayoutEvent>(ge.payload);
      QCOMPARE(g.strategy, w->strategy);
      QVERIFY(g.tensors == w->tensors);
      QVERIFY(g.params == w->params);
      QVERIFY(g.grads == w->grads);
      QVERIFY(g.optimizer_state == w->optimizer_state);
      QVERIFY(g.state_arrays == w->state_arrays);
      QCOMPARE(g.bytes_per_element, w->bytes_per_element);
      QCOMPARE(g.params_padding, w->params_padding);
      QCOMPARE(g.grads_padding, w->grads_padding);
      QCOMPARE(g.state_padding, w->state_padding);
      QVERIFY(g.planned == w->planned);
      QCOMPARE(g.formula, w->formula);
      QVERIFY(g.units == w->units);
      QCOMPARE(g.truncated, w->truncated);
    }
  }
}

uint32_t read_le32(const std::vector<uint8_t>& b, size_t at) {
  return uint32_t{b[at]} | (uint32_t{b[at + 1]} << 8) | (uint32_t{b[at + 2]} << 16) |
         (uint32_t{b[at + 3]} << 24);
}
void write_le32(std::vector<uint8_t>& b, size_t at, uint32_t v) {
  for (size_t i = 0; i < 4; ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
}
// After editing a payload by hand: make the header's length agree with it again.
void fix_length(std::vector<uint8_t>& frame) {
  write_le32(frame, 8, static_cast<uint32_t>(frame.size() - kHeaderSize));
}

// The one byte where two encodings differ (a bool or enum field), found rather than hard-coded.
size_t differing_byte(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  size_t at = a.size();
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    if (a[i] != b[i]) {
      if (at != a.size()) return a.size();  // more than one: not a single-byte field
      at = i;
    }
  return at;
}

// Decodes `frame`, expects an error whose text contains every one of `words`.
void expect_error(const std::vector<uint8_t>& frame, std::initializer_list<const char*> words,
                  uint32_t max_payload = kDefaultMaxPayload) {
  const DecodeResult r = decode_frame(frame, max_payload);
  QVERIFY2(r.status == Status::error, "expected a decode error");
  QCOMPARE(r.consumed, size_t{0});
  const QString msg = QString::fromStdString(r.error);
  for (const char* w : words)
    QVERIFY2(msg.contains(QLatin1String(w)),
             qPrintable(QString("'%1' does not mention '%2'").arg(msg, QLatin1String(w))));
}

// Checks the decoder's contract on arbitrary bytes; also decodes `bytes` as a stream.
bool decode_is_sane(std::span<const uint8_t> bytes) {
  size_t offset = 0;
  while (true) {
    const auto rest = bytes.subspan(offset);
    const DecodeResult r = decode_frame(rest);
    switch (r.status) {
      case Status::ok:
        if (r.consumed < kHeaderSize || r.consumed > rest.size()) return false;
        // The encoding is canonical: re-encoding what was decoded gives back the same bytes
        // (for frames of this version; older ones re-encode in the current one). A HELLO's
        // header says its lowest version, which need not be the frame's.
        if (rest[4] == kProtocolVersion && rest[5] == 0) {
          std::vector<uint8_t> again = encode(r.message);
          if (std::holds_alternative<Hello>(r.message)) again[4] = rest[4];
          if (!std::ranges::equal(again, rest.first(r.consumed))) return false;
        }
        offset += r.consumed;
        continue;
      case Status::need_more:
        return r.consumed == 0 && r.error.empty();
      case Status::error:
        return r.consumed == 0 && !r.error.empty();
    }
    return false;
  }
}

}  // namespace

class TestProtocol : public QObject {
  Q_OBJECT
 private slots:
  void namesOfMessageTypes() {
    QCOMPARE(QString(to_string(MessageType::hello)), QString("hello"));
    QCOMPARE(QString(to_string(MessageType::auth_ok)), QString("auth_ok"));
    QCOMPARE(QString(to_string(MessageType::collective)), QString("collective"));
    QCOMPARE(QString(to_string(MessageType::job_state)), QString("job_state"));
    QCOMPARE(QString(to_string(static_cast<MessageType>(999))), QString("unknown"));
  }

  void headerIsLittleEndianOnTheWire() {
    tel::Event e;
    e.rank = 0x01020304;
    e.seq = 0x0A0B0C0D0E0F1011ull;
    e.time = 1.0;  // 0x3FF0000000000000
    e.payload = tel::HeartbeatEvent{};
    const std::vector<uint8_t> want = {
        'S',  'L',  'T',  'M',                           // magic
        5,    0,                                         // version
        20,   0,                                         // heartbeat
        20,   0,    0,    0,                             // payload length
        0x04, 0x03, 0x02, 0x01,                          // rank
        0x11, 0x10, 0x0F, 0x0E, 0x0D, 0x0C, 0x0B, 0x0A,  // seq
        0,    0,    0,    0,    0,    0,    0xF0, 0x3F,  // time
    };
    QVERIFY(encode(e) == want);
    if constexpr (std::endian::native == std::endian::little) {
      // On a little-endian host the packed struct is the wire image of the header.
      FrameHeader h;
      h.type = 20;
      h.length = 20;
      QVERIFY(std::memcmp(&h, want.data(), kHeaderSize) == 0);
    }
  }

  void roundTripEveryKind() {
    for (const Message& m : samples()) {
      const std::vector<uint8_t> frame = encode(m);
      QVERIFY(frame.size() >= kHeaderSize);
      QCOMPARE(read_le32(frame, 0), kMagic);
      QCOMPARE(frame[6] | (frame[7] << 8), static_cast<int>(type_of(m)));
      QCOMPARE(size_t{read_le32(frame, 8)}, frame.size() - kHeaderSize);
      const DecodeResult r = decode_frame(frame);
      QVERIFY2(r.status == Status::ok, r.error.c_str());
      QCOMPARE(r.consumed, frame.size());
      compare(r.message, m);
      if (QTest::currentTestFailed()) return;
    }
  }

  void encodeIntoBatchesDecodeInSequence() {
    const auto msgs = samples();
    std::vector<uint8_t> stream = {0xAB};  // encode_into appends; it does not clear
    for (const auto& m : msgs) encode_into(m, stream);
    for (const auto& m : msgs) encode_into(m, stream);  // twice through
    size_t offset = 1;
    for (size_t i = 0; i < 2 * msgs.size(); ++i) {
      const DecodeResult r = decode_frame(std::span(stream).subspan(offset));
      QVERIFY2(r.status == Status::ok, r.error.c_str());
      compare(r.message, msgs[i % msgs.size()]);
      if (QTest::currentTestFailed()) return;
      offset += r.consumed;
    }
    QCOMPARE(offset, stream.size());
    QVERIFY(decode_frame(std::span(stream).subspan(offset)).status == Status::need_more);

    // A failed encode leaves the batch untouched.
    const auto before = stream;
    QVERIFY_THROWS_EXCEPTION(
        InvalidArgument,
        encode_into(make_event(tel::LogLineEvent{std::string(kMaxString + 1, 'x')}), stream));
    QVERIFY(stream == before);
  }

  void everyStrictPrefixNeedsMore() {
    for (const Message& m : samples()) {
      const std::vector<uint8_t> frame = encode(m);
      for (size_t k = 0; k < frame.size(); ++k) {
        const DecodeResult r = decode_frame(std::span(frame.data(), k));
        QVERIFY2(r.status == Status::need_more,
                 qPrintable(QString("prefix %1 of %2 (%3): %4")
                                .arg(k)
                                .arg(frame.size())
                                .arg(to_string(type_of(m)))
                                .arg(QString::fromStdString(r.error))));
        QCOMPARE(r.consumed, size_t{0});
      }
    }
  }

  void stringsAtTheLimit() {
    const Message at_limit = make_event(tel::LogLineEvent{std::string(kMaxString, 'y')});
    const auto frame = encode(at_limit);
    const DecodeResult r = decode_frame(frame);
    QVERIFY2(r.status == Status::ok, r.error.c_str());
    compare(r.message, at_limit);

    Hello h;
    h.host = std::string(kMaxString + 1, 'h');
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, encode(h));
    tel::CollectiveEvent c;
    c.group = std::string(kMaxString + 1, 'g');
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, encode(make_event(c)));
    QVERIFY_THROWS_EXCEPTION(
        InvalidArgument,
        encode(make_event(tel::JobStateEvent{static_cast<tel::JobState>(9), "x"})));
  }

  // A version-2 HELLO (no lowest version, no nonce) and CHALLENGE (a nonce only), as a worker or
  // collector before version 3 sent them and recordings of that time hold them, still decode. The
  // frames are written here byte by byte, not by the encoder (which only writes version 3).
  void handshakeFramesOfVersion2Decode() {
    std::vector<uint8_t> hello = {'S', 'L', 'T', 'M', 2, 0, 1, 0, 0, 0, 0, 0};
    auto put = [&hello](uint64_t v, int n) {
      for (int i = 0; i < n; ++i) hello.push_back(static_cast<uint8_t>(v >> (8 * i)));
    };
    put(2, 2);  // version
    put(3, 4);  // job id "abc"
    hello.insert(hello.end(), {'a', 'b', 'c'});
    for (int32_t v : {5, 8, 1, 1, 8, 0, 0, 5}) put(static_cast<uint32_t>(v), 4);
    put(1, 4);  // host "h"
    hello.push_back('h');
    put(4242, 8);  // pid
    const uint32_t length = static_cast<uint32_t>(hello.size() - kHeaderSize);
    for (int i = 0; i < 4; ++i) hello[8 + i] = static_cast<uint8_t>(length >> (8 * i));
    DecodeResult r = decode_frame(hello);
    QVERIFY2(r.status == Status::ok, r.error.c_str());
    const auto& h = std::get<Hello>(r.message);
    QCOMPARE(h.version, uint16_t(2));
    QCOMPARE(h.min_version, uint16_t(2));  // spoke exactly one version
    QCOMPARE(h.job_id, std::string("abc"));
    QCOMPARE(h.rank, 5);
    QCOMPARE(h.pid, int64_t(4242));
    QVERIFY(h.nonce == decltype(h.nonce){});

    std::vector<uint8_t> challenge = {'S', 'L', 'T', 'M', 2, 0, 2, 0, 32, 0, 0, 0};
    for (int i = 0; i < 32; ++i) challenge.push_back(static_cast<uint8_t>(100 + i));
    r = decode_frame(challenge);
    QVERIFY2(r.status == Status::ok, r.error.c_str());
    const auto& c = std::get<Challenge>(r.message);
    QCOMPARE(c.version, uint16_t(2));
    QCOMPARE(c.nonce[0], uint8_t(100));
    QCOMPARE(c.nonce[31], uint8_t(131));
    // The same 32 bytes under version 3 are too short for a CHALLENGE.
    challenge[4] = 3;
    expect_error(challenge, {"challenge payload", "truncated"});
  }

  void headerErrors() {
    const auto good = encode(make_event(tel::HeartbeatEvent{}));

    auto bad = good;
    bad[0] = 'X';
    expect_error(bad, {"bad magic"});
    // A wrong first byte is enough: the receiver should not wait for the rest.
    expect_error(std::vector<uint8_t>{'X'}, {"bad magic"});
    expect_error(std::vector<uint8_t>{'S', 'L', 'X'}, {"bad magic", "byte 2"});
    bad = good;
    bad[3] = 'N';
    expect_error(bad, {"bad magic", "0x4E544C53"});

    bad = good;
    static_assert(kProtocolVersion == 5, "update the unknown version below");
    bad[4] = 6;
    expect_error(bad, {"version 6", "reads 1 to 5"});
    bad[4] = 0;
    expect_error(bad, {"version 0"});
    bad[4] = 0;
    bad[5] = 1;
    expect_error(std::vector<uint8_t>(bad.begin(), bad.begin() + 6), {"version 256"});

    for (uint16_t type : {0, 6, 15, 25, 0xFFFF}) {
      bad = good;
      bad[6] = static_cast<uint8_t>(type);
      bad[7] = static_cast<uint8_t>(type >> 8);
      expect_error(bad, {"unknown message type", std::to_string(type).c_str()});
    }
  }

  // A version-1 COLLECTIVE (written before waits were recorded; recordings keep such frames)
  // ends at `ok`: it decodes with wait and last rank unknown. The same bytes labelled version 2
  // are short by the two new fields.
  // Version 4 brought the LAYOUT event: a frame of it labelled 3 is refused, a connection that
  // chose 3 cannot encode one (the publisher leaves it out, speaks()), and every other message
  // encodes in 3 exactly as in 4 but for the header.
  void layoutNeedsVersionFour() {
    const Message layout = make_event(sample_layout());
    QVERIFY(speaks(layout, 4));
    QVERIFY(!speaks(layout, 3));
    std::vector<uint8_t> frame = encode(layout, 4);
    QCOMPARE(frame[4], uint8_t{4});
    frame[4] = 3;
    expect_error(frame, {"layout", "version 4", "says 3"});
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, encode(layout, 3));
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, encode(make_event(tel::HeartbeatEvent{}), 2));
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, encode(make_event(tel::HeartbeatEvent{}), 6));
    for (const Message& m : samples()) {
      if (!speaks(m, 3)) continue;
      if (const auto* e = std::get_if<tel::Event>(&m);
          e && std::holds_alternative<tel::CollectiveEvent>(e->payload))
        continue;  // version 5 added to it (versionFiveSaysWhatMoved)
      std::vector<uint8_t> v3 = encode(m, 3), v4 = encode(m, 4);
      v4[4] = v3[4];
      QVERIFY(v3 == v4);
      const DecodeResult r = decode_frame(encode(m, 3));
      QVERIFY2(r.status == Status::ok, r.error.c_str());
      compare(r.message, m);
    }
    // A HELLO's header carries the lowest version the worker speaks, so that a collector of that
    // version reads it (it refuses a header of a version it does not know).
    Hello h;
    h.min_version = 3;
    QCOMPARE(encode(Message(h))[4], uint8_t{3});
  }

  // Version 5 says what a collective moved (array, unit) and carries the LAYOUT's units. The
  // same events written in version 4 leave those out and decode as unknown / no units, as
  // recordings of version 4 do; every other message encodes in 4 exactly as in 5.
  void versionFiveSaysWhatMoved() {
    for (const Message& m : samples()) {
      std::vector<uint8_t> v4 = encode(m, 4), v5 = encode(m, 5);
      const auto* e = std::get_if<tel::Event>(&m);
      const bool grew = e && (std::holds_alternative<tel::CollectiveEvent>(e->payload) ||
                              std::holds_alternative<tel::LayoutEvent>(e->payload));
      if (!grew) {
        v4[4] = v5[4];
        QVERIFY(v4 == v5);
        continue;
      }
      QVERIFY(v4.size() < v5.size());
      const DecodeResult r = decode_frame(v4);
      QVERIFY2(r.status == Status::ok, r.error.c_str());
      const auto& got = std::get<tel::Event>(r.message).payload;
      if (const auto* c = std::get_if<tel::CollectiveEvent>(&got)) {
        QCOMPARE(c->array, tel::CollectiveArray::unknown);
        QCOMPARE(c->unit, -1);
        QCOMPARE(c->op, std::get<tel::CollectiveEvent>(e->payload).op);
      } else {
        const auto& l = std::get<tel::LayoutEvent>(got);
        QVERIFY(l.units.empty());
        QVERIFY(l.optimizer_state == std::get<tel::LayoutEvent>(e->payload).optimizer_state);
      }
    }
    // An array this build does not know is refused.
    tel::CollectiveEvent c;
    c.array = tel::CollectiveArray::grads;
    std::vector<uint8_t> frame = encode(make_event(c));
    frame[frame.size() - 5] = 3;  // the array byte, before the i32 unit
    expect_error(frame, {"collective array 3", "out of range"});
    // Units of more than kMaxLayoutRanges ranges in all are refused on both sides.
    tel::LayoutEvent l;
    l.units.assign(2, std::vector<tel::LayoutRange>(tel::kMaxLayoutRanges / 2 + 1, {0, 1}));
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, encode(make_event(l)));
  }

  // A layout list's count is checked against what is left of the payload before anything is
  // allocated, and against kMaxLayoutRanges; a range must be one.
  void layoutListsAreBounded() {
    tel::LayoutEvent l;
    l.params = {{0, 1}};
    std::vector<uint8_t> frame = encode(make_event(l));
    // Payload: rank 4, seq 8, time 8, strategy 4 + 0, bytes per element 8, tensors count 4, then
    // the params count.
    const size_t params_count = kHeaderSize + 20 + 4 + 8 + 4;
    QCOMPARE(read_le32(frame, params_count), 1u);
    auto bad = frame;
    write_le32(bad, params_count, 0xFFFFFFFFu);
    expect_error(bad, {"layout payload", "params", "runs past the end"});
    // Begin 5, end 1: not a range.
    bad = frame;
    bad[params_count + 4] = 5;
    expect_error(bad, {"layout payload", "[5, 1)", "not a range"});

    l.params.assign(tel::kMaxLayoutRanges + 1, {0, 1});
    QVERIFY_THROWS_EXCEPTION(InvalidArgument, encode(make_event(l)));
  }

  void versionOneCollectiveDecodes() {
    tel::CollectiveEvent c;
    c.op = "all_reduce";
    c.group = "world";
    c.bytes = 4096;
    c.duration = 0.25;
    c.wait = 0.125;
    c.last_rank = 3;
    std::vector<uint8_t> frame = encode(Message(make_event(c)), 4);  // before array and unit
    frame.resize(frame.size() - 12);                                 // f64 wait + i32 last rank
    fix_length(frame);
    expect_error(frame, {"collective"});
    frame[4] = 1;
    const DecodeResult r = decode_frame(frame);
    QVERIFY2(r.status == Status::ok, r.error.c_str());
    const auto& got = std::get<tel::CollectiveEvent>(std::get<tel::Event>(r.message).payload);
    QCOMPARE(got.bytes, int64_t{4096});
    QCOMPARE(got.duration, 0.25);
    QCOMPARE(got.wait, -1.0);
    QCOMPARE(got.last_rank, -1);
  }

  void oversizedPayloads() {
    const auto frame = encode(make_event(tel::LogLineEvent{std::string(100, 'z')}));
    const uint32_t length = read_le32(frame, 8);
    QVERIFY(decode_frame(frame, length).status == Status::ok);
    expect_error(frame, {"payload of", std::to_string(length).c_str(), "exceeds"}, length - 1);
    // Over the limit is known from the header alone: no need to wait for the payload.
    expect_error(std::vector<uint8_t>(frame.begin(), frame.begin() + kHeaderSize), {"exceeds"},
                 length - 1);

    auto huge = encode(make_event(tel::HeartbeatEvent{}));
    write_le32(huge, 8, 2'000'000);
    expect_error(huge, {"payload of 2000000 bytes exceeds", "1048576"});
  }

  void maxLengthFieldIsAnErrorWithoutAllocating() {
    std::vector<uint8_t> frame = encode(make_event(tel::HeartbeatEvent{}));
    write_le32(frame, 8, 0xFFFFFFFFu);
    g_largest = 0;
    g_track = true;
    const DecodeResult r = decode_frame(frame);
    const DecodeResult unlimited = decode_frame(frame, 0xFFFFFFFFu);
    g_track = false;
    QVERIFY(r.status == Status::error);
    QVERIFY2(QString::fromStdString(r.error).contains("4294967295"), r.error.c_str());
    // With no limit at all the frame is merely incomplete; still nothing is reserved for it.
    QVERIFY(unlimited.status == Status::need_more);
    QVERIFY2(g_largest < 4096, qPrintable(QString("largest allocation %1").arg(g_largest)));
  }

  void payloadErrors() {
    // Truncated fixed fields: a challenge one byte short, declared as such.
    auto frame = encode(Challenge{});
    frame.pop_back();
    fix_length(frame);
    expect_error(frame, {"challenge", "truncated", "proof"});

    // A string whose length runs past the payload.
    frame = encode(make_event(tel::LogLineEvent{"hello"}));
    write_le32(frame, kHeaderSize + kEventPrefix, 6);
    expect_error(frame, {"log", "string 'text'", "runs past"});
    frame = encode(Hello{});
    write_le32(frame, kHeaderSize + 2, 1000);
    expect_error(frame, {"hello", "string 'job_id'", "runs past"});

    // A string over kMaxString, even when the payload does hold that many bytes.
    frame = encode(make_event(tel::LogLineEvent{std::string(kMaxString, 'q')}));
    frame.push_back('q');
    write_le32(frame, kHeaderSize + kEventPrefix, kMaxString + 1);
    fix_length(frame);
    expect_error(frame, {"string 'text'", "65537", "exceeds the limit"});

    // Trailing bytes after the last field.
    for (const Message& m : samples()) {
      frame = encode(m);
      frame.push_back(0);
      frame.push_back(0);
      fix_length(frame);
      expect_error(frame, {to_string(type_of(m)), "2 trailing bytes"});
      if (QTest::currentTestFailed()) return;
    }

    // Bool bytes other than 0 and 1, found by encoding both values and diffing.
    auto bad_bool = [](const Message& f, const Message& t, const char* field) {
      auto frame = encode(f);
      const size_t at = differing_byte(frame, encode(t));
      QVERIFY(at < frame.size());
      frame[at] = 2;
      expect_error(frame, {"bad bool", field});
    };
    tel::StepEvent s;
    tel::StepEvent s_tok;
    s_tok.tokens = true;
    bad_bool(make_event(s), make_event(s_tok), "tokens");
    tel::CollectiveEvent c;
    tel::CollectiveEvent c_bad;
    c_bad.ok = false;
    bad_bool(make_event(c), make_event(c_bad), "ok");
    // A phase outside the enum (3 is the first value past optimizer).
    tel::PhaseEvent p;
    tel::PhaseEvent p_back;
    p_back.phase = tel::Phase::backward;
    frame = encode(make_event(p));
    const size_t phase_at = differing_byte(frame, encode(make_event(p_back)));
    QVERIFY(phase_at < frame.size());
    frame[phase_at] = 3;
    expect_error(frame, {"phase 3", "out of range"});

    // A job state outside the enum.
    frame = encode(make_event(tel::JobStateEvent{tel::JobState::running, "r"}));
    const size_t at =
        differing_byte(frame, encode(make_event(tel::JobStateEvent{tel::JobState::finished, "r"})));
    QVERIFY(at < frame.size());
    frame[at] = 4;
    expect_error(frame, {"job state 4", "out of range"});
    frame[at] = 0xFF;
    expect_error(frame, {"job state 255"});
  }

  void randomBytesNeverCrash() {
    std::mt19937 rng(20240611);
    std::uniform_int_distribution<int> byte(0, 255);
    std::uniform_int_distribution<int> len(0, 96);
    std::vector<uint8_t> buf;
    int insane = 0;
    // Pure noise mostly dies at the magic; half the inputs get a valid header prefix (random type
    // among the real ones and a small length) so the payload parsers are exercised too.
    static constexpr uint16_t kTypes[] = {1, 2, 3, 4, 16, 17, 18, 19, 20, 21, 22, 23};
    for (int i = 0; i < 100000; ++i) {
      buf.resize(static_cast<size_t>(len(rng)));
      for (auto& b : buf) b = static_cast<uint8_t>(byte(rng));
      if (i % 2 == 1 && buf.size() >= kHeaderSize) {
        write_le32(buf, 0, kMagic);
        buf[4] = 1;
        buf[5] = 0;
        const uint16_t type = kTypes[static_cast<size_t>(byte(rng)) % std::size(kTypes)];
        buf[6] = static_cast<uint8_t>(type);
        buf[7] = 0;
        write_le32(buf, 8, static_cast<uint32_t>(byte(rng) % 100));
      }
      if (!decode_is_sane(buf)) ++insane;
    }
    QCOMPARE(insane, 0);

    // Valid frames with a few bytes flipped, truncated or extended.
    const auto msgs = samples();
    for (int i = 0; i < 100000; ++i) {
      buf = encode(msgs[static_cast<size_t>(i) % msgs.size()]);
      const int flips = 1 + byte(rng) % 3;
      for (int f = 0; f < flips; ++f)
        buf[static_cast<size_t>(rng() % buf.size())] = static_cast<uint8_t>(byte(rng));
      if (byte(rng) < 64) buf.resize(static_cast<size_t>(rng() % (buf.size() + 8)));
      if (!decode_is_sane(buf)) ++insane;
    }
    QCOMPARE(insane, 0);
  }
};

QTEST_GUILESS_MAIN(TestProtocol)
#include "tst_protocol.moc"
