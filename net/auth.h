// Authentication of telemetry connections: SHA-256 (FIPS 180-4) and HMAC (RFC 2104), written
// here from the standards so the build needs no crypto library, plus the job's shared token.
//
// The token is random per job (32 bytes from std::random_device, hex-encoded). It travels through
// a file (mode 0600) or the SHARDLAB_TELEMETRY_TOKEN environment variable, never on a command
// line, where other users could read it in the process list.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

namespace shardlab::net {

using Digest = std::array<uint8_t, 32>;

Digest sha256(std::span<const uint8_t> data);
Digest hmac_sha256(std::span<const uint8_t> key, std::span<const uint8_t> message);
// Constant-time comparison.
bool digest_equal(const Digest& a, const Digest& b);

// 64 hex characters of fresh randomness.
std::string make_token();
// 32 random bytes from std::random_device (challenges).
std::array<uint8_t, 32> random_nonce();

// Writes the token and a newline to `path` with permissions 0600 (replacing the file; an existing
// file's mode is tightened too); throws IoError, or InvalidArgument for an empty token.
void write_token_file(const std::string& path, const std::string& token);
// Reads a token: the file's first line, trimmed. Throws IoError (missing file) or
// InvalidArgument (empty).
std::string read_token_file(const std::string& path);
// The token from `path` when given (an explicit file wins), else from SHARDLAB_TELEMETRY_TOKEN
// (trimmed; set but empty counts as unset); throws InvalidArgument naming both when neither is
// there, IoError when the file cannot be read.
std::string find_token(const std::string& path);

inline constexpr const char* kTokenEnv = "SHARDLAB_TELEMETRY_TOKEN";

}  // namespace shardlab::net
