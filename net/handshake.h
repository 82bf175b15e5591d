// The protocol's handshake (version 3) and the integrity of the stream after it: both sides prove
// they hold the job's token, bound to everything said so far, and derive a session key with which
// every run of event frames is sealed. Pure computation: the collector and the publisher do the
// I/O (net/collector.cpp, net/publisher.cpp).
//
//   worker    -> HELLO      versions [min, max] it speaks, rank and coordinates, nonce Nw
//   collector -> CHALLENGE  version v chosen, nonce Nc, proof Pc
//   worker    -> AUTH       proof Pw
//   collector -> AUTH_OK
//   worker    -> event frames ..., BATCH_MAC, event frames ..., BATCH_MAC, ...
//
//   T  = SHA-256("shardlab telemetry handshake" || u16 v || the HELLO frame's bytes || Nc)
//   Pc = HMAC-SHA256(token, "collector proof" || T)   checked by the worker before it answers
//   Pw = HMAC-SHA256(token, "worker proof" || T)      checked by the collector
//   K  = HMAC-SHA256(token, "session key" || T)
//   BATCH_MAC i = HMAC-SHA256(K, u64 i || the bytes of the event frames since BATCH_MAC i-1)
//
// Why this shape (the attacks it must stop: replay, downgrade, reflection, a port held first):
// - Both nonces are fresh per connection and inside T, so no proof or MAC from one connection is
//   worth anything on another (no replay), and the HELLO's bytes are inside T, so a party in the
//   middle cannot change the rank, the coordinates or the versions the worker offered (no
//   downgrade) without both proofs failing.
// - The labels differ by direction: a collector's proof sent back as a worker's is refused (no
//   reflection), and someone who holds the port first without the token cannot make Pc, so a
//   worker never streams its telemetry to it.
// - Events count only once their BATCH_MAC checks, under K, which only holders of the token can
//   derive; the batch counter i makes dropping, repeating or reordering runs fail.
// Not covered: confidentiality (the frames are not encrypted: run workers on a trusted network or
// through a tunnel when the telemetry itself is secret), and a party in the middle can always cut
// a connection (the worker reconnects; the collector reports the rank lost).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "net/auth.h"
#include "net/protocol.h"

namespace shardlab::net {

// The version a collector speaking [kOldestLiveVersion, kProtocolVersion] and a worker speaking
// [hello.min_version, hello.version] both speak: the highest such, or 0 when there is none.
uint16_t negotiate_version(const Hello& hello);
// "worker speaks protocol versions 2 to 2, this collector 3 to 3 ..." for a HELLO with no common
// version.
std::string version_mismatch(const Hello& hello);

// What both sides derive from the handshake.
struct HandshakeKeys {
  Digest transcript{};       // T
  Digest collector_proof{};  // Pc
  Digest worker_proof{};     // Pw
  Digest session_key{};      // K
};
HandshakeKeys derive_keys(const std::string& token, uint16_t version,
                          std::span<const uint8_t> hello_frame, std::span<const uint8_t, 32> nonce);

// The worker's side. The constructor draws the worker nonce (throws IoError when the OS's random
// source fails) and encodes the HELLO.
class WorkerHandshake {
 public:
  WorkerHandshake(std::string token, Hello hello);
  // The HELLO frame to send.
  const std::vector<uint8_t>& hello_frame() const { return hello_frame_; }
  // The AUTH frame that answers `challenge`. Throws IoError when the collector chose a version
  // this worker does not speak or could not prove it holds the token ("... wrong token, or not
  // this job's collector").
  std::vector<uint8_t> answer(const Challenge& challenge);
  // The session key (after answer()).
  const Digest& session_key() const { return keys_.session_key; }

 private:
  std::string token_;
  Hello hello_;
  std::vector<uint8_t> hello_frame_;
  HandshakeKeys keys_;
};

// The collector's side.
class CollectorHandshake {
 public:
  explicit CollectorHandshake(std::string token) : token_(std::move(token)) {}
  // The CHALLENGE for a HELLO (its decoded form and its frame's exact bytes); "" in `problem`
  // and a challenge, or the reason to refuse the worker (no common version). Throws IoError when
  // the OS's random source fails.
  Challenge challenge(const Hello& hello, std::span<const uint8_t> hello_frame,
                      std::string& problem);
  // Whether the AUTH proves the token for this handshake (constant time).
  bool check(const Auth& auth) const;
  const Digest& session_key() const { return keys_.session_key; }

 private:
  std::string token_;
  HandshakeKeys keys_;
};

// The worker's side of the stream: seal() appends a BATCH_MAC for the event frames in
// out[from, out.size()). Batches are numbered from 0 per connection.
class BatchSealer {
 public:
  // `version`: the connection's (the BATCH_MAC frames are written in it).
  explicit BatchSealer(const Digest& session_key, uint16_t version = kProtocolVersion);
  void seal(std::vector<uint8_t>& out, size_t from);
  uint64_t batches() const { return index_; }

 private:
  HmacSha256 mac_;
  uint16_t version_;
  uint64_t index_ = 0;
};

// A worker seals at least every kSealBytes of event frames; the collector holds at most
// kSealBytes plus one frame unchecked (max_unsealed_bytes()).
inline constexpr size_t kSealBytes = 64 * 1024;

// The collector's side: add() each event frame's bytes as it arrives, check() at a BATCH_MAC.
class BatchVerifier {
 public:
  explicit BatchVerifier(const Digest& session_key);
  void add(std::span<const uint8_t> frame);
  // True when the MAC is right for the frames added since the last check (constant time); either
  // way the next batch starts empty.
  bool check(const BatchMac& mac);
  size_t unsealed_bytes() const { return unsealed_; }
  uint64_t batches() const { return index_; }

 private:
  void start_batch();
  HmacSha256 mac_;
  uint64_t index_ = 0;
  size_t unsealed_ = 0;
};

// The unchecked bytes a collector holds at most for a connection whose frames are at most
// `max_payload` bytes.
inline size_t max_unsealed_bytes(uint32_t max_payload) {
  return kSealBytes + kHeaderSize + max_payload;
}

// A stream of whole event frames (`frames`, as encode() writes them back to back) sealed: a
// BATCH_MAC after at most every `every` bytes and after the last frame. For tools and tests that
// send prepared frames (the ingest benchmark); throws InvalidArgument when `frames` does not end
// on a frame boundary.
std::vector<uint8_t> seal_frames(std::span<const uint8_t> frames, BatchSealer& sealer,
                                 size_t every = kSealBytes);

}  // namespace shardlab::net
