// libFuzzer target: a checkpoint shard file (engine/checkpoint/shard_file.h) over arbitrary bytes,
// read as a resumed run or `checkpoint consolidate` reads it: the file is written to a scratch file
// (the reader takes a path), read_shard_header(path, its size) checks the magic, the header length
// and CRC, the header JSON, the runs and the tensors' extents, and then every tensor the header
// lists is read with read_shard_tensor (its values and CRC).
//
// The file for an input: an input that starts with "SL" is the file itself, byte for byte (the
// magic, the header length, the CRCs: anything). Any other input is a header's text, a NUL, then
// the data section, which this target seals into a file with the magic, the header's length and
// its CRC-32, so that mutations of the header JSON are not all stopped at the checksum. (To hand
// such an input to `shardlab`, seal it the same way: "SLSHRD2\0", u32 length, text, u32 CRC-32,
// data, little-endian.)
//
// A finding (fuzz_common.h): a crash, an ASan/UBSan report (a read outside the input, an
// overflowing offset), an exception that is not a shardlab::Error (or an InternalError), an error
// message that is not one printable line, a timeout or an allocation over the limit (a count
// trusted before it is checked against the file); and these contracts: an accepted header's
// tensors lie inside the file, back to back, each holding elements() values, and a tensor read
// returns exactly that many.
// Each input runs on a 256 KiB stack (fuzz::on_small_stack), so that recursion driven by nesting
// the reader failed to bound overflows within -max_len.
#include <zlib.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "engine/checkpoint/shard_file.h"
#include "tests/fuzz/fuzz_common.h"

using namespace shardlab;

namespace {

void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

// The shard file an input stands for (see the top of this file).
std::vector<uint8_t> shard_file(const uint8_t* data, size_t size) {
  if (size >= 2 && data[0] == 'S' && data[1] == 'L') return {data, data + size};
  const uint8_t* nul = std::find(data, data + size, uint8_t{0});
  const size_t header = static_cast<size_t>(nul - data);
  std::vector<uint8_t> file = {'S', 'L', 'S', 'H', 'R', 'D', '2', '\0'};
  put_u32(file, static_cast<uint32_t>(header));
  file.insert(file.end(), data, data + header);
  put_u32(file, static_cast<uint32_t>(::crc32(0L, data, static_cast<uInt>(header))));
  if (header < size) file.insert(file.end(), nul + 1, data + size);
  return file;
}

void read_input(const uint8_t* input, size_t input_size) {
  static fuzz::ScratchFile file("shard");
  const std::vector<uint8_t> bytes = shard_file(input, input_size);
  const size_t size = bytes.size();
  const std::string& path = file.write(bytes.data(), size);
  ShardHeader h;
  if (!fuzz::value_or_error([&] { h = read_shard_header(path, size); })) return;

  const int64_t n = h.elements();
  fuzz::check(n >= 0, "negative element count");
  fuzz::check(h.data_start <= size, "data section starts past the end of the file");
  uint64_t expected = 0;
  for (const ShardTensor& t : h.tensors) {
    fuzz::check(t.count == n, "a tensor's count differs from the runs' elements");
    fuzz::check(t.offset == expected, "tensors not back to back");
    expected += static_cast<uint64_t>(n) * sizeof(float);
    fuzz::check(h.data_start + expected <= size, "a tensor ends past the end of the file");
  }
  for (const ShardTensor& t : h.tensors) {
    std::vector<float> values;
    if (fuzz::value_or_error([&] { values = read_shard_tensor(path, h, t.name); }))
      fuzz::check(values.size() == static_cast<size_t>(n), "a tensor read returned another count");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::on_small_stack(fuzz::kReaderStack, [&] { read_input(data, size); });
  return 0;
}
