// Little-endian byte streams for the engine's binary formats (optimizer state, sharded state,
// model files): ByteWriter appends, ByteReader reads with bounds checks whose errors name the
// format and the field, and crc32 checksums the result.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

namespace shardlab {

static_assert(std::endian::native == std::endian::little,
              "the binary formats are written with memcpy and assume a little-endian host");

// CRC-32 (zlib's polynomial) of n bytes.
uint32_t crc32_of(const uint8_t* data, size_t n);

// A buffer whose last 4 bytes are the CRC-32 of the rest (ByteWriter::checksum): the stored and
// the recomputed value. Each format words its own error, so this only compares.
struct TrailingChecksum {
  uint32_t stored = 0, computed = 0;
  bool ok() const { return stored == computed; }
};
// `b` must hold at least 4 bytes.
TrailingChecksum trailing_checksum(std::span<const uint8_t> b);

class ByteWriter {
 public:
  explicit ByteWriter(size_t reserve = 0) { out_.reserve(reserve); }
  void bytes(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out_.insert(out_.end(), b, b + n);
  }
  template <typename T>
  void pod(T v) {
    bytes(&v, sizeof v);
  }
  void str(const std::string& s) {
    pod(static_cast<uint32_t>(s.size()));
    bytes(s.data(), s.size());
  }
  // A length (i64) and the floats.
  void floats(std::span<const float> v) {
    pod(static_cast<int64_t>(v.size()));
    bytes(v.data(), v.size() * sizeof(float));
  }
  // Appends the CRC-32 of everything written so far.
  void checksum() { pod(crc32_of(out_.data(), out_.size())); }
  std::vector<uint8_t>& out() { return out_; }

 private:
  std::vector<uint8_t> out_;
};

// Bounds-checked cursor: a read past the end throws FormatError
// "<format>: truncated while reading <what> at byte <pos> (needs n bytes, m left)".
class ByteReader {
 public:
  ByteReader(std::span<const uint8_t> b, std::string format) : b_(b), format_(std::move(format)) {}
  size_t pos() const { return pos_; }
  size_t left() const { return b_.size() - pos_; }
  const uint8_t* take(size_t n, const char* what);
  template <typename T>
  T pod(const char* what) {
    T v;
    std::memcpy(&v, take(sizeof v, what), sizeof v);
    return v;
  }
  std::string str(const char* what);
  // Reads floats written by ByteWriter::floats into `out`, which must have the stored length
  // (FormatError naming `what` and both lengths otherwise).
  void floats(std::span<float> out, const char* what);
  // Checks that the last 4 bytes are the CRC-32 of the rest (FormatError otherwise) and limits
  // reading to the bytes before them.
  void verify_checksum();

 private:
  std::span<const uint8_t> b_;
  std::string format_;
  size_t pos_ = 0;
};

}  // namespace shardlab
