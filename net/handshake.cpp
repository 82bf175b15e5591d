#include "net/handshake.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <string_view>

#include "engine/core/error.h"

namespace shardlab::net {

namespace {

std::span<const uint8_t> bytes_of(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// HMAC-SHA256(token, label || T).
Digest labelled(const std::string& token, std::string_view label, const Digest& transcript) {
  std::vector<uint8_t> message(label.begin(), label.end());
  message.insert(message.end(), transcript.begin(), transcript.end());
  return hmac_sha256(bytes_of(token), message);
}

std::array<uint8_t, 8> le64(uint64_t v) {
  std::array<uint8_t, 8> out{};
  for (size_t i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(v >> (8 * i));
  return out;
}

}  // namespace

uint16_t negotiate_version(const Hello& hello) {
  const uint16_t high = std::min(hello.version, kProtocolVersion);
  const uint16_t low = std::max(hello.min_version, kOldestLiveVersion);
  return high >= low ? high : 0;
}

std::string version_mismatch(const Hello& hello) {
  return fmt::format(
      "worker speaks protocol versions {} to {}, this collector {} to {} (version 3 brought mutual "
      "authentication and a checked stream); run the same ShardLab version on both sides",
      hello.min_version, hello.version, kOldestLiveVersion, kProtocolVersion);
}

HandshakeKeys derive_keys(const std::string& token, uint16_t version,
                          std::span<const uint8_t> hello_frame,
                          std::span<const uint8_t, 32> nonce) {
  constexpr std::string_view kContext = "shardlab telemetry handshake";
  std::vector<uint8_t> t(kContext.begin(), kContext.end());
  t.push_back(static_cast<uint8_t>(version));
  t.push_back(static_cast<uint8_t>(version >> 8));
  t.insert(t.end(), hello_frame.begin(), hello_frame.end());
  t.insert(t.end(), nonce.begin(), nonce.end());
  HandshakeKeys k;
  k.transcript = sha256(t);
  k.collector_proof = labelled(token, "collector proof", k.transcript);
  k.worker_proof = labelled(token, "worker proof", k.transcript);
  k.session_key = labelled(token, "session key", k.transcript);
  return k;
}

WorkerHandshake::WorkerHandshake(std::string token, Hello hello)
    : token_(std::move(token)), hello_(std::move(hello)) {
  hello_.version = kProtocolVersion;
  hello_.min_version = kOldestLiveVersion;
  hello_.nonce = random_nonce();
  hello_frame_ = encode(Message(hello_));
}

std::vector<uint8_t> WorkerHandshake::answer(const Challenge& challenge) {
  if (challenge.version < kOldestLiveVersion || challenge.version > kProtocolVersion)
    SL_THROW(IoError,
             "the collector chose protocol version {}, this worker speaks {} to {}; run the same "
             "ShardLab version on both sides",
             challenge.version, kOldestLiveVersion, kProtocolVersion);
  keys_ = derive_keys(token_, challenge.version, hello_frame_, challenge.nonce);
  Digest proof{};
  std::copy(challenge.proof.begin(), challenge.proof.end(), proof.begin());
  if (!digest_equal(proof, keys_.collector_proof))
    SL_THROW(IoError,
             "the collector could not prove it holds the job's token (a wrong token, or not this "
             "job's collector); no telemetry was sent to it");
  Auth auth;
  std::copy(keys_.worker_proof.begin(), keys_.worker_proof.end(), auth.mac.begin());
  return encode(Message(auth), challenge.version);  // in the version the collector chose
}

Challenge CollectorHandshake::challenge(const Hello& hello, std::span<const uint8_t> hello_frame,
                                        std::string& problem) {
  problem.clear();
  Challenge c;
  c.version = negotiate_version(hello);
  if (c.version == 0) {
    problem = version_mismatch(hello);
    return c;
  }
  c.nonce = random_nonce();
  keys_ = derive_keys(token_, c.version, hello_frame, c.nonce);
  std::copy(keys_.collector_proof.begin(), keys_.collector_proof.end(), c.proof.begin());
  return c;
}

bool CollectorHandshake::check(const Auth& auth) const {
  Digest got{};
  std::copy(auth.mac.begin(), auth.mac.end(), got.begin());
  return digest_equal(got, keys_.worker_proof);
}

BatchSealer::BatchSealer(const Digest& session_key, uint16_t version)
    : mac_(session_key), version_(version) {}

void BatchSealer::seal(std::vector<uint8_t>& out, size_t from) {
  SL_ENFORCE_T(InternalError, from <= out.size(), "seal from {} past the end {}", from, out.size());
  mac_.update(le64(index_++));
  mac_.update(std::span<const uint8_t>(out).subspan(from));
  BatchMac b;
  const Digest d = mac_.final();
  std::copy(d.begin(), d.end(), b.mac.begin());
  encode_into(Message(b), out, version_);
}

BatchVerifier::BatchVerifier(const Digest& session_key) : mac_(session_key) {
  start_batch();
}

void BatchVerifier::start_batch() {
  mac_.update(le64(index_));
  unsealed_ = 0;
}

void BatchVerifier::add(std::span<const uint8_t> frame) {
  mac_.update(frame);
  unsealed_ += frame.size();
}

bool BatchVerifier::check(const BatchMac& mac) {
  const Digest want = mac_.final();
  Digest got{};
  std::copy(mac.mac.begin(), mac.mac.end(), got.begin());
  ++index_;
  start_batch();
  return digest_equal(want, got);
}

std::vector<uint8_t> seal_frames(std::span<const uint8_t> frames, BatchSealer& sealer,
                                 size_t every) {
  std::vector<uint8_t> out;
  out.reserve(frames.size() + (frames.size() / std::max<size_t>(every, 1) + 1) * 44);
  size_t batch_start = 0;
  for (size_t pos = 0; pos < frames.size();) {
    SL_ENFORCE(frames.size() - pos >= kHeaderSize,
               "seal_frames: {} bytes at offset {} are not a whole frame header",
               frames.size() - pos, pos);
    uint32_t length = 0;
    std::memcpy(&length, frames.data() + pos + 8, 4);
    SL_ENFORCE(frames.size() - pos - kHeaderSize >= length,
               "seal_frames: the frame at offset {} runs past the end", pos);
    const size_t end = pos + kHeaderSize + length;
    out.insert(out.end(), frames.begin() + static_cast<std::ptrdiff_t>(pos),
               frames.begin() + static_cast<std::ptrdiff_t>(end));
    pos = end;
    if (out.size() - batch_start >= every || pos == frames.size()) {
      sealer.seal(out, batch_start);
      batch_start = out.size();
    }
  }
  return out;
}

}  // namespace shardlab::net
