#include "engine/core/bytes.h"

#include <zlib.h>

#include "engine/core/error.h"

namespace shardlab {

uint32_t crc32_of(const uint8_t* data, size_t n) {
  // crc32_z takes a size_t length, so multi-GiB buffers need no chunking.
  return static_cast<uint32_t>(crc32_z(crc32_z(0L, Z_NULL, 0), data, n));
}

const uint8_t* ByteReader::take(size_t n, const char* what) {
  SL_ENFORCE_T(FormatError, n <= left(),
               "{}: truncated while reading {} at byte {} (needs {} bytes, {} left)", format_, what,
               pos_, n, left());
  const uint8_t* p = b_.data() + pos_;
  pos_ += n;
  return p;
}

std::string ByteReader::str(const char* what) {
  const auto n = pod<uint32_t>(what);
  const uint8_t* p = take(n, what);
  return std::string(reinterpret_cast<const char*>(p), n);
}

void ByteReader::floats(std::span<float> out, const char* what) {
  const auto n = pod<int64_t>(what);
  SL_ENFORCE_T(FormatError, n == static_cast<int64_t>(out.size()),
               "{}: {} holds {} values, expected {}", format_, what, n, out.size());
  std::memcpy(out.data(), take(out.size() * sizeof(float), what), out.size() * sizeof(float));
}

TrailingChecksum trailing_checksum(std::span<const uint8_t> b) {
  TrailingChecksum c;
  std::memcpy(&c.stored, b.data() + b.size() - 4, 4);
  c.computed = crc32_of(b.data(), b.size() - 4);
  return c;
}

void ByteReader::verify_checksum() {
  SL_ENFORCE_T(FormatError, b_.size() >= 4, "{}: {} bytes is too short to hold a checksum", format_,
               b_.size());
  const TrailingChecksum crc = trailing_checksum(b_);
  SL_ENFORCE_T(FormatError, crc.ok(),
               "{}: checksum mismatch (stored {:08x}, computed {:08x}): the data is corrupt or "
               "truncated",
               format_, crc.stored, crc.computed);
  b_ = b_.first(b_.size() - 4);
}

}  // namespace shardlab
