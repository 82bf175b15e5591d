// Checksums as the checkpoint formats store them, computed with zlib directly (never with the code
// under test), for the checkpoint suites.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace shardlab::test {

inline uint32_t zlib_crc(const void* p, size_t n) {
  return uint32_t(::crc32(::crc32(0L, Z_NULL, 0), static_cast<const Bytef*>(p), uInt(n)));
}

inline uint32_t zlib_crc(const std::vector<uint8_t>& b) {
  return zlib_crc(b.data(), b.size());
}

// A CRC as the formats write it: eight lower-case hex digits.
inline std::string hex8(uint32_t v) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

}  // namespace shardlab::test
