// libFuzzer target: a run recording (.slrec, net/recording.h) as `shardlab replay` and the app
// read it. The reader takes a path and has no in-memory entry point, so each input is written to
// a scratch file (fixed name per process) and read with read_recording: the file magic and
// version, then block after block (magic, sizes, message count, CRC-32), each block's frames
// through decode_frame; a truncated or corrupt tail ends the read with a note.
//
// A finding (fuzz_common.h): a crash, an ASan/UBSan report, an exception that is not a
// shardlab::Error (or an InternalError), a timeout or an allocation over the limit (a block's
// count or size trusted before it is checked); and these contracts: the note is empty exactly
// when the recording is complete, and every message read encodes again (what a recording of a
// replay would write).
#include <cstddef>
#include <cstdint>
#include <string>

#include "net/protocol.h"
#include "net/recording.h"
#include "tests/fuzz/fuzz_common.h"

using namespace shardlab;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fuzz::ScratchFile file("recording");
  const std::string& path = file.write(data, size);
  net::RecordingContents contents;
  if (!fuzz::value_or_error([&] { contents = net::read_recording(path); })) return 0;
  fuzz::check(contents.complete == contents.note.empty(),
              "a recording's note is empty exactly when it is complete");
  for (const net::Message& m : contents.messages)
    fuzz::check(fuzz::value_or_error([&] { (void)net::encode(m); }),
                "a message read from a recording does not encode again");
  return 0;
}
