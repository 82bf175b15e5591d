// libFuzzer target: a run recording (.slrec, net/recording.h) as `shardlab replay` and the app
// read it. The reader takes a path and has no in-memory entry point, so each file is written to a
// scratch file and read with read_recording: the file magic and version, then block after block
// (magic, sizes, message count, CRC-32), each block's frames through decode_frame; a truncated or
// corrupt tail ends the read with a note.
//
// The file for an input: an input that starts with "SL" is the file itself, byte for byte. Any
// other input is the blocks after the file header: this target puts the header ("SLREC\0\0\0",
// version 1) before them and gives each block whose payload fits in the input the CRC-32 of its
// payload, so that mutations of the counts and frames are not all stopped at the checksum.
//
// A finding (fuzz_common.h): a crash, an ASan/UBSan report, an exception that is not a
// shardlab::Error (or an InternalError), an error message that is not one printable line, a
// timeout or an allocation over the limit (a block's count or size trusted before it is checked);
// and these contracts: the note is empty exactly when the recording is complete, and every message
// read encodes again (what a recording of a replay would write).
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "net/protocol.h"
#include "net/recording.h"
#include "tests/fuzz/fuzz_common.h"

using namespace shardlab;

namespace {

uint32_t get_u32(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

void set_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

// The recording an input stands for (see the top of this file).
std::vector<uint8_t> recording_file(const uint8_t* data, size_t size) {
  if (size >= 2 && data[0] == 'S' && data[1] == 'L') return {data, data + size};
  std::vector<uint8_t> file = {'S', 'L', 'R', 'E', 'C', 0, 0, 0, 1, 0, 0, 0};
  const size_t start = file.size();
  file.insert(file.end(), data, data + size);
  // Blocks: u32 magic, u32 payload bytes, u32 count, u32 CRC-32 of the payload, the payload.
  for (size_t off = start; file.size() - off >= 16;) {
    const uint32_t payload = get_u32(file.data() + off + 4);
    if (payload > file.size() - off - 16) break;
    set_u32(file.data() + off + 12,
            static_cast<uint32_t>(::crc32(0L, file.data() + off + 16, payload)));
    off += 16 + size_t{payload};
  }
  return file;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* input, size_t input_size) {
  static fuzz::ScratchFile file("recording");
  const std::vector<uint8_t> bytes = recording_file(input, input_size);
  const std::string& path = file.write(bytes.data(), bytes.size());
  net::RecordingContents contents;
  if (!fuzz::value_or_error([&] { contents = net::read_recording(path); })) return 0;
  fuzz::check(contents.complete == contents.note.empty(),
              "a recording's note is empty exactly when it is complete");
  for (const net::Message& m : contents.messages)
    fuzz::check(fuzz::value_or_error([&] { (void)net::encode(m); }),
                "a message read from a recording does not encode again");
  return 0;
}
