// libFuzzer target for the telemetry frame decoder (net/protocol.h). Built with clang++
// -fsanitize=fuzzer,address,undefined when available (tests/net/CMakeLists.txt). Besides "no
// crash, no over-read", it checks the decoder's contract: consumed within the input, an error
// always has a reason, and an accepted frame re-encodes to exactly the bytes it was decoded from
// (a frame of an older protocol version: to a current frame that round-trips).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

#include "net/protocol.h"

namespace {

using shardlab::net::decode_frame;
using shardlab::net::DecodeResult;
using Status = DecodeResult::Status;

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "decoder contract violated: %s\n", what);
    std::abort();
  }
}

// Decodes frames one after another while they are ok, as a receiver does with its buffer.
void decode_stream(std::span<const uint8_t> bytes, uint32_t max_payload) {
  size_t offset = 0;
  while (true) {
    const auto rest = bytes.subspan(offset);
    const DecodeResult r = decode_frame(rest, max_payload);
    if (r.status == Status::need_more) {
      check(r.consumed == 0 && r.error.empty(), "need_more with consumed bytes or an error");
      return;
    }
    if (r.status == Status::error) {
      check(r.consumed == 0 && !r.error.empty(), "error without a reason");
      return;
    }
    check(r.consumed >= shardlab::net::kHeaderSize && r.consumed <= rest.size(),
          "consumed outside the input");
    check(r.consumed - shardlab::net::kHeaderSize <= max_payload, "payload over the limit");
    const std::vector<uint8_t> again = shardlab::net::encode(r.message);
    if (rest[4] == shardlab::net::kProtocolVersion && rest[5] == 0) {
      // A HELLO's header says the lowest version its worker speaks (from version 3 on), whatever
      // the frame it came in said: the rest of it must be the same.
      std::vector<uint8_t> same = again;
      if (std::holds_alternative<shardlab::net::Hello>(r.message)) same[4] = rest[4];
      check(std::ranges::equal(same, rest.first(r.consumed)), "re-encoding differs");
    } else {
      // An older version's frame re-encodes in the current one, which must decode to the same.
      // (It may be longer: a version-1 CHALLENGE of 32 bytes is 66 in version 3, so it is decoded
      // under the default limit rather than the small one this pass uses.)
      const DecodeResult back = decode_frame(again, shardlab::net::kDefaultMaxPayload);
      check(back.status == Status::ok && back.consumed == again.size() &&
                std::ranges::equal(shardlab::net::encode(back.message), again),
            "an older frame's re-encoding does not round-trip");
    }
    offset += r.consumed;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  decode_stream(bytes, shardlab::net::kDefaultMaxPayload);
  // A small limit too, so the over-limit path meets real payloads.
  decode_stream(bytes, 64);
  return 0;
}
