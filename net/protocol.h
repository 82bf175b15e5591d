// The telemetry wire protocol, version 5: length-prefixed binary frames over TCP, little-endian.
//
//   frame   = header (12 bytes) + payload (header.length bytes, at most the receiver's limit,
//             1 MiB by default)
//   header  = u32 magic 'SLTM' (0x4D544C53 read as little-endian bytes "SLTM"), u16 version,
//             u16 message type, u32 payload length
//
// Versions: 1 the first; 2 added the collective's wait and last rank; 3 mutual authentication and
// the stream's integrity (the oldest a live connection speaks); 4 the LAYOUT event; 5 what a
// collective moved (its array and unit) and the LAYOUT's units. After the handshake a worker
// writes its frames in the version the collector chose (leaving out what that version lacks), and
// sends no LAYOUT to a collector that chose 3.
//
// Connection (version 3; net/handshake.h has the cryptography and the reasons): the worker sends
// HELLO with the versions it speaks and a fresh nonce; the collector picks the highest version
// both speak and answers CHALLENGE (that version, its own nonce, and its proof that it holds the
// job's token, an HMAC over the whole handshake so far); the worker checks the proof and answers
// AUTH (its own proof, bound to the same transcript and to its direction); the collector answers
// AUTH_OK, or closes the connection with a logged reason. Then the worker streams event frames
// (one message type per event kind), each run of them followed by a BATCH_MAC: an HMAC under a
// session key both sides derived from the handshake, so the stream cannot be altered, cut and
// spliced, or added to on the way. The collector hands on a run's events only once its BATCH_MAC
// checks. Strings are u32 length + bytes (at most 64 KiB).
//
// Payloads (after the header):
//   HELLO       u16 highest protocol version spoken, str job id, i32 rank, i32 world size, i32 pp,
//               i32 tp, i32 dp, i32 pp_i, i32 tp_i, i32 dp_i, str host, i64 pid, then (version 3)
//               u16 lowest protocol version spoken, 32 bytes worker nonce. Its frame header
//               carries the lowest version the worker speaks, so any collector that speaks that
//               one can read it.
//   CHALLENGE   (version 3) u16 version chosen, 32 bytes collector nonce, 32 bytes collector proof;
//               (versions 1, 2) 32 bytes nonce
//   AUTH        32 bytes;  AUTH_OK  nothing;  BATCH_MAC  32 bytes (version 3)
//   events      i32 rank, u64 seq, f64 time, then per kind:
//     STEP        i64 step, f64 loss, f64 lr, f64 grad norm, f64 throughput, u8 tokens,
//                 f64 step seconds
//     MEMORY      i64 x kMemCategories current, i64 x kMemCategories peak
//     COLLECTIVE  str op, str group, i64 bytes, f64 start, f64 duration, f64 algbw, f64 busbw,
//                 u64 seq, u8 ok, f64 wait, i32 last rank (version 2; version 1 frames end at
//                 ok and read as wait -1, last rank -1), u8 array (0 unknown, 1 params, 2 grads),
//                 i32 unit (version 5; older frames read as unknown, -1)
//     PHASE       i32 stage, i32 micro-batch, u8 phase (0 forward, 1 backward, 2 optimizer; a
//                 recording from before the optimizer phase reads as 0/1), f64 start, f64 end
//     HEARTBEAT   nothing;  LOG  str text;  JOB_STATE  u8 state, str reason
//     EVAL        i64 step, f64 loss, f64 accuracy, i64 samples
//     LAYOUT      (version 4) str strategy, i64 bytes per element, u32 n x (str name, i64 offset,
//                 i64 size) tensors, then params, grads and optimizer_state, each u32 n (at most
//                 kMaxLayoutRanges) x (i64 begin, i64 end), u32 n x str state arrays, i64 params
//                 padding, i64 grads padding, i64 state padding, i64 x 3 planned bytes, str
//                 formula, u8 truncated, then (version 5) u32 n units x (u32 m x (i64 begin,
//                 i64 end)), at most kMaxLayoutRanges ranges in all (engine/telemetry/events.h,
//                 LayoutEvent)
//
// decode_frame() is a pure function over bytes (no I/O, no allocation beyond its result) so it
// can be fuzzed; it never reads past the span and rejects anything malformed with a reason.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "engine/telemetry/events.h"

namespace shardlab::net {

inline constexpr uint32_t kMagic = 0x4D544C53;  // bytes "SLTM"
inline constexpr uint16_t kProtocolVersion = 5;
// Frames of versions kOldestProtocolVersion..kProtocolVersion decode (recordings made by older
// builds replay).
inline constexpr uint16_t kOldestProtocolVersion = 1;
// The oldest version a live connection may speak: version 3 brought mutual authentication and the
// integrity of the stream, and a collector that fell back to version 2 for an old worker would
// let anyone in the middle talk it down to a stream nobody can check.
inline constexpr uint16_t kOldestLiveVersion = 3;
inline constexpr size_t kHeaderSize = 12;
inline constexpr uint32_t kDefaultMaxPayload = 1u << 20;
inline constexpr size_t kChallengeSize = 32;
inline constexpr size_t kMaxString = 64 * 1024;
// The sequence number of an event a collector makes up itself rather than receives: the JOB_STATE
// failed that stands for a rank whose connection ended before it reported finishing (collector.h,
// ConnectionLost). Workers number their events from 0 and never reach it; a recording keeps it, so
// a replay tells such a failure from one the rank reported.
inline constexpr uint64_t kCollectorSeq = ~uint64_t{0};
// Limits a collector holds a HELLO to: the world size (ranks are [0, world)), and the length of its
// job id and host name.
inline constexpr int32_t kMaxWorld = 1 << 16;
inline constexpr size_t kMaxHelloString = 512;

enum class MessageType : uint16_t {
  hello = 1,
  challenge = 2,
  auth = 3,
  auth_ok = 4,
  batch_mac = 5,
  step = 16,
  memory = 17,
  collective = 18,
  phase = 19,
  heartbeat = 20,
  log = 21,
  job_state = 22,
  eval = 23,
  layout = 24,  // version 4 on
};
const char* to_string(MessageType type);

#pragma pack(push, 1)
struct FrameHeader {
  uint32_t magic = kMagic;
  uint16_t version = kProtocolVersion;
  uint16_t type = 0;
  uint32_t length = 0;
};
#pragma pack(pop)
static_assert(sizeof(FrameHeader) == kHeaderSize, "the frame header is 12 bytes on the wire");

struct Hello {
  uint16_t version = kProtocolVersion;  // the highest version the worker speaks
  std::string job_id;
  int32_t rank = 0, world = 1;
  int32_t pp = 1, tp = 1, dp = 1;
  int32_t pp_i = 0, tp_i = 0, dp_i = 0;
  std::string host;
  int64_t pid = 0;
  // Version 3 on (a HELLO of an older frame reads as min_version = version and a zero nonce).
  uint16_t min_version = kOldestLiveVersion;  // the lowest version the worker speaks
  std::array<uint8_t, kChallengeSize> nonce{};
};
struct Challenge {
  uint16_t version = kProtocolVersion;  // the version the collector chose (version 3 on)
  std::array<uint8_t, kChallengeSize> nonce{};
  std::array<uint8_t, 32> proof{};  // version 3 on
};
struct Auth {
  std::array<uint8_t, 32> mac{};
};
struct AuthOk {};
// Closes a run of event frames: the HMAC of their bytes under the session key (net/handshake.h).
struct BatchMac {
  std::array<uint8_t, 32> mac{};
};

using Message = std::variant<Hello, Challenge, Auth, AuthOk, BatchMac, telemetry::Event>;

// The whole frame (header + payload) for a message, in protocol `version` (a live connection's
// negotiated one; kOldestLiveVersion..kProtocolVersion). A HELLO's header carries its
// min_version instead. Throws InvalidArgument for a string longer than kMaxString, a JobState
// outside its enumerators, a layout list over kMaxLayoutRanges, or a message `version` does not
// have (speaks()).
std::vector<uint8_t> encode(const Message& message, uint16_t version = kProtocolVersion);
// Appends the frame to `out` (what a batching writer uses); on a throw `out` is left unchanged.
void encode_into(const Message& message, std::vector<uint8_t>& out,
                 uint16_t version = kProtocolVersion);
// Whether protocol `version` can carry `message` (a LAYOUT event needs 4).
bool speaks(const Message& message, uint16_t version);

struct DecodeResult {
  enum class Status { ok, need_more, error };
  Status status = Status::need_more;
  size_t consumed = 0;  // bytes of the frame (ok only)
  Message message;      // ok only
  std::string error;    // error only: "bad magic 0x...", "payload of 2000000 bytes exceeds ..."
};

// Decodes the first frame of `bytes`: ok with the message and its size, need_more when the frame
// is not complete yet (a valid prefix), error when it can never be valid (wrong magic, wrong
// version, unknown type, payload over max_payload, a payload that does not parse exactly).
DecodeResult decode_frame(std::span<const uint8_t> bytes,
                          uint32_t max_payload = kDefaultMaxPayload);

}  // namespace shardlab::net
