// libFuzzer target: a checkpoint's manifest.json as `shardlab checkpoint inspect` and a resumed run
// read it (engine/checkpoint/manifest.h). Feeds the input as the file's text to parse_manifest
// (JSON, then every field type- and range-checked, then manifest_problem()), and a manifest that
// reads to describe() (what inspect prints, the layout dumped) and to_json() (what commit()
// writes).
//
// A finding (fuzz_common.h): a crash, an ASan/UBSan report, an exception that is not a
// shardlab::Error (or an InternalError), an error message that is not one printable line, a
// timeout or an allocation over the limit; and these contracts: a manifest that reads has no
// manifest_problem(), what describe() shows of it has no control character but its newlines
// (inspect prints it on the terminal), and what to_json() writes for it reads back to the same
// manifest (a checkpoint the store writes, the store can read).
// Each input runs on a 256 KiB stack (fuzz::on_small_stack), so that recursion driven by nesting
// the reader failed to bound overflows within -max_len.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "engine/checkpoint/checkpoint_store.h"
#include "engine/checkpoint/manifest.h"
#include "tests/fuzz/fuzz_common.h"

using namespace shardlab;

namespace {

void read_input(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  CheckpointManifest m;
  if (!fuzz::value_or_error([&] { m = parse_manifest(text, "step-00000100/manifest.json"); }))
    return;
  fuzz::check(manifest_problem(m).empty(),
              "parse_manifest returned a manifest with a problem: " + manifest_problem(m));
  std::string shown;
  fuzz::check(fuzz::value_or_error([&] { shown = describe(m); }),
              "describe() refused a manifest that reads");
  for (const unsigned char c : shown)
    fuzz::check(c >= 0x20 || c == '\n',
                "describe() (what checkpoint inspect prints) holds a control character: \"" +
                    fuzz::escaped(shown) + "\"");

  std::string written;
  fuzz::check(fuzz::value_or_error([&] { written = to_json(m).dump(2); }),
              "to_json() refused a manifest that reads");
  CheckpointManifest again;
  fuzz::check(fuzz::value_or_error([&] { again = parse_manifest(written, "rewritten.json"); }),
              "the manifest to_json() writes does not read back");
  fuzz::check(to_json(again) == to_json(m), "the manifest to_json() writes reads back differently");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::on_small_stack(fuzz::kReaderStack, [&] { read_input(data, size); });
  return 0;
}
