// Reader for IDX files, the container format of (Fashion-)MNIST: two zero bytes, an element-type
// byte, a dimension-count byte, one big-endian uint32 per dimension, then the elements in
// row-major order. Files may be gzip-compressed or plain; the reader tells them apart by content,
// not by name. Only unsigned-byte elements (type 0x08) are supported, which is all the image and
// label files ShardLab reads need.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace shardlab {

// An IDX file's contents: its dimensions and the raw row-major bytes.
struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;

  // Product of dims (1 for no dims, which read_idx never returns).
  int64_t numel() const;
};

// Refuse headers whose element count exceeds this, so a garbage header cannot request a huge
// allocation. 1 GiB is twenty times the largest Fashion-MNIST file.
inline constexpr int64_t kIdxMaxBytes = int64_t{1} << 30;
// At most this many dimensions; real files have 1 (labels) to 3 (images).
inline constexpr int kIdxMaxDims = 8;

// Reads a whole IDX file, plain or gzip.
// Throws IoError when the file is missing or unreadable, FormatError when the header is malformed
// (bad magic, unsupported type, too many dims, over kIdxMaxBytes), the data is shorter or longer
// than the header promises, or the gzip stream is corrupt. Messages name the file.
IdxArray read_idx(const std::string& path);

}  // namespace shardlab
