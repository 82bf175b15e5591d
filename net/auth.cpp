#include "net/auth.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>

#include "engine/core/error.h"

namespace shardlab::net {

namespace {

// ---------------------------------------------------------------------------------------------
// SHA-256, FIPS 180-4 section 6.2. Incremental, so HMAC hashes key pad and message without
// concatenating them.

constexpr std::array<uint32_t, 64> kK = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

constexpr uint32_t rotr(uint32_t x, int n) {
  return (x >> n) | (x << (32 - n));
}

class Sha256 {
 public:
  static constexpr size_t kBlock = 64;

  void update(std::span<const uint8_t> data) {
    for (uint8_t byte : data) {
      block_[fill_++] = byte;
      if (fill_ == kBlock) {
        compress();
        fill_ = 0;
      }
    }
    bits_ += static_cast<uint64_t>(data.size()) * 8;
  }

  Digest finish() {
    // Padding (5.1.1): a 1 bit, zeros up to 56 mod 64 bytes, then the message length in bits as
    // a big-endian u64.
    const uint64_t bits = bits_;
    block_[fill_++] = 0x80;
    if (fill_ > 56) {
      while (fill_ < kBlock) block_[fill_++] = 0;
      compress();
      fill_ = 0;
    }
    while (fill_ < 56) block_[fill_++] = 0;
    for (int i = 7; i >= 0; --i) block_[fill_++] = static_cast<uint8_t>(bits >> (8 * i));
    compress();
    Digest out{};
    for (size_t i = 0; i < 8; ++i)
      for (size_t j = 0; j < 4; ++j) out[4 * i + j] = static_cast<uint8_t>(h_[i] >> (24 - 8 * j));
    return out;
  }

 private:
  void compress() {
    std::array<uint32_t, 64> w;
    for (size_t t = 0; t < 16; ++t)
      w[t] = (uint32_t{block_[4 * t]} << 24) | (uint32_t{block_[4 * t + 1]} << 16) |
             (uint32_t{block_[4 * t + 2]} << 8) | uint32_t{block_[4 * t + 3]};
    for (size_t t = 16; t < 64; ++t) {
      const uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
      const uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
      w[t] = w[t - 16] + s0 + w[t - 7] + s1;
    }
    uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4], f = h_[5], g = h_[6], h = h_[7];
    for (size_t t = 0; t < 64; ++t) {
      const uint32_t S1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
      const uint32_t ch = (e & f) ^ (~e & g);
      const uint32_t t1 = h + S1 + ch + kK[t] + w[t];
      const uint32_t S0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
      const uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
      const uint32_t t2 = S0 + maj;
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    h_[0] += a;
    h_[1] += b;
    h_[2] += c;
    h_[3] += d;
    h_[4] += e;
    h_[5] += f;
    h_[6] += g;
    h_[7] += h;
  }

  // Initial hash value (5.3.3).
  std::array<uint32_t, 8> h_ = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  std::array<uint8_t, kBlock> block_{};
  size_t fill_ = 0;
  uint64_t bits_ = 0;
};

std::string trim(const std::string& s) {
  const char* ws = " \t\r\n\v\f";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return {};
  const size_t e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

}  // namespace

Digest sha256(std::span<const uint8_t> data) {
  Sha256 h;
  h.update(data);
  return h.finish();
}

Digest hmac_sha256(std::span<const uint8_t> key, std::span<const uint8_t> message) {
  // RFC 2104: keys longer than the block are hashed first; shorter ones are zero-padded.
  std::array<uint8_t, Sha256::kBlock> k{};
  if (key.size() > Sha256::kBlock) {
    const Digest kd = sha256(key);
    std::copy(kd.begin(), kd.end(), k.begin());
  } else {
    std::copy(key.begin(), key.end(), k.begin());
  }
  std::array<uint8_t, Sha256::kBlock> pad;
  for (size_t i = 0; i < pad.size(); ++i) pad[i] = k[i] ^ 0x36;
  Sha256 inner;
  inner.update(pad);
  inner.update(message);
  const Digest inner_digest = inner.finish();
  for (size_t i = 0; i < pad.size(); ++i) pad[i] = k[i] ^ 0x5c;
  Sha256 outer;
  outer.update(pad);
  outer.update(inner_digest);
  return outer.finish();
}

bool digest_equal(const Digest& a, const Digest& b) {
  // No early exit: the time taken must not tell an attacker how many leading bytes matched.
  volatile uint8_t diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff = static_cast<uint8_t>(diff | (a[i] ^ b[i]));
  return diff == 0;
}

std::array<uint8_t, 32> random_nonce() {
  std::random_device rd;
  std::array<uint8_t, 32> out{};
  for (size_t i = 0; i < out.size(); i += 4) {
    const uint32_t v = rd();
    for (size_t j = 0; j < 4; ++j) out[i + j] = static_cast<uint8_t>(v >> (8 * j));
  }
  return out;
}

std::string make_token() {
  static constexpr char kHex[] = "0123456789abcdef";
  const auto bytes = random_nonce();
  std::string token;
  token.reserve(2 * bytes.size());
  for (uint8_t b : bytes) {
    token.push_back(kHex[b >> 4]);
    token.push_back(kHex[b & 0xf]);
  }
  return token;
}

void write_token_file(const std::string& path, const std::string& token) {
  SL_ENFORCE(!trim(token).empty(), "refusing to write an empty telemetry token to {}", path);
  // open() with the mode, not an ofstream: the file must never exist with looser permissions,
  // not even for a moment.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) SL_THROW(IoError, "cannot create token file {}: {}", path, std::strerror(errno));
  // An existing file keeps its old mode under O_CREAT; tighten it.
  if (::fchmod(fd, 0600) != 0) {
    const int err = errno;
    ::close(fd);
    SL_THROW(IoError, "cannot set permissions 0600 on token file {}: {}", path, std::strerror(err));
  }
  const std::string content = token + "\n";
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      SL_THROW(IoError, "cannot write token file {}: {}", path, std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0)
    SL_THROW(IoError, "cannot write token file {}: {}", path, std::strerror(errno));
}

std::string read_token_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) SL_THROW(IoError, "cannot read token file {}: {}", path, std::strerror(errno));
  std::string line;
  std::getline(in, line);
  if (in.bad()) SL_THROW(IoError, "cannot read token file {}", path);
  std::string token = trim(line);
  SL_ENFORCE(!token.empty(), "token file {} is empty (expected the token on its first line)", path);
  return token;
}

std::string find_token(const std::string& path) {
  // An explicit file wins: a stale exported variable must not override what the user named.
  if (!path.empty()) return read_token_file(path);
  if (const char* env = std::getenv(kTokenEnv)) {
    std::string token = trim(env);
    if (!token.empty()) return token;
  }
  SL_THROW(InvalidArgument, "no telemetry token: pass --token-file PATH or set {}", kTokenEnv);
}

}  // namespace shardlab::net
