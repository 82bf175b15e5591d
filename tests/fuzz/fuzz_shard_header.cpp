// libFuzzer target: a checkpoint shard file (engine/checkpoint/shard_file.h) over arbitrary bytes,
// read as a resumed run or `checkpoint consolidate` reads it: the input is written to a scratch
// file (the reader takes a path), read_shard_header(path, its size) checks the magic, the header
// length and CRC, the header JSON, the runs and the tensors' extents, and then every tensor the
// header lists is read with read_shard_tensor (its values and CRC).
//
// A finding (fuzz_common.h): a crash, an ASan/UBSan report (a read outside the input, an
// overflowing offset), an exception that is not a shardlab::Error (or an InternalError), a timeout
// or an allocation over the limit (a count trusted before it is checked against the file); and
// these contracts: an accepted header's tensors lie inside the file, back to back, each holding
// elements() values, and a tensor read returns exactly that many.
// Each input runs on a 256 KiB stack (fuzz::on_small_stack), so that recursion driven by nesting
// the reader failed to bound overflows within -max_len.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/checkpoint/shard_file.h"
#include "tests/fuzz/fuzz_common.h"

using namespace shardlab;

namespace {

void read_input(const uint8_t* data, size_t size) {
  static fuzz::ScratchFile file("shard");
  const std::string& path = file.write(data, size);
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
