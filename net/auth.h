// Authentication of telemetry connections: SHA-256, HMAC-SHA256, constant-time comparison and
// random bytes, all from OpenSSL's libcrypto (EVP_Digest, HMAC, CRYPTO_memcmp, RAND_bytes), plus
// the job's shared token.
//
// The token is random per job (32 bytes from RAND_bytes, hex-encoded). It travels through a file
// or the SHARDLAB_TELEMETRY_TOKEN environment variable, never on a command line, where other users
// could read it in the process list. A token file is the user's own regular file, mode 0600, at
// most 4 KiB; a token (from a file or the variable) has at least kMinTokenLength characters.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace shardlab::net {

using Digest = std::array<uint8_t, 32>;

Digest sha256(std::span<const uint8_t> data);
Digest hmac_sha256(std::span<const uint8_t> key, std::span<const uint8_t> message);
// Constant-time comparison.
bool digest_equal(const Digest& a, const Digest& b);

// HMAC-SHA256 over a message given in pieces (OpenSSL's EVP_MAC): what a receiver uses to check
// bytes as they arrive without keeping them. Movable, not copyable.
class HmacSha256 {
 public:
  explicit HmacSha256(std::span<const uint8_t> key);
  ~HmacSha256();
  HmacSha256(HmacSha256&& other) noexcept;
  HmacSha256& operator=(HmacSha256&& other) noexcept;
  HmacSha256(const HmacSha256&) = delete;
  HmacSha256& operator=(const HmacSha256&) = delete;

  void update(std::span<const uint8_t> data);
  // The MAC of everything since the last final() (or construction), and a fresh start under the
  // same key.
  Digest final();

 private:
  void restart();
  struct Ctx;
  Ctx* ctx_ = nullptr;
};

// 64 hex characters of fresh randomness (RAND_bytes); throws IoError when OpenSSL's generator
// fails.
std::string make_token();
// 32 random bytes from RAND_bytes (challenges); throws IoError when the generator fails.
std::array<uint8_t, 32> random_nonce();

// The shortest token accepted: the handshake is an HMAC over nonces an eavesdropper sees, so one
// captured handshake lets a short token be guessed offline.
inline constexpr size_t kMinTokenLength = 32;
// The largest token file read (a token is 64 hex characters).
inline constexpr size_t kMaxTokenFileSize = 4096;

// Writes the token and a newline to `path`, atomically: a new file (mode 0600, O_EXCL, O_NOFOLLOW)
// in the same directory, written, synced and renamed over `path`. Whatever was at `path` (a file,
// a symlink, a FIFO) is replaced, never written through, and a reader never sees half a token.
// Throws IoError, or InvalidArgument for an empty or too short token.
void write_token_file(const std::string& path, const std::string& token);
// Reads a token: the file's first line, trimmed. The file is opened without following a symlink
// and without blocking; it must be a regular file owned by this user, not readable or writable by
// group or others, and at most kMaxTokenFileSize bytes. Throws IoError (missing, not a regular
// file, too large, wrong owner or mode) or InvalidArgument (empty, shorter than kMinTokenLength).
std::string read_token_file(const std::string& path);
// The token from `path` when given (an explicit file wins), else from SHARDLAB_TELEMETRY_TOKEN
// (trimmed; set but empty counts as unset; shorter than kMinTokenLength is refused); throws
// InvalidArgument naming both when neither is there, IoError when the file cannot be read.
std::string find_token(const std::string& path);

inline constexpr const char* kTokenEnv = "SHARDLAB_TELEMETRY_TOKEN";

}  // namespace shardlab::net
