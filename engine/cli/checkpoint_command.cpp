// shardlab checkpoint inspect DIR: what a sharded checkpoint holds (its manifest) and whether every
// shard is intact (size and CRC-32 against the manifest).
#include <fmt/format.h>

#include <cstdio>

#include "engine/checkpoint/checkpoint_store.h"
#include "engine/cli/args.h"
#include "engine/cli/commands.h"

namespace shardlab::cli {

int checkpoint_command(const std::vector<std::string>& argv) {
  Args args(argv, {{}, {}});
  const auto& pos = args.positional();
  if (pos.empty() || pos[0] != "inspect" || pos.size() != 2)
    SL_THROW(UsageError,
             "checkpoint needs 'inspect DIR', e.g. shardlab checkpoint inspect runs/ckpt (DIR: a "
             "checkpoint directory or one of its step-* directories)");
  const std::string step_dir = find_checkpoint(pos[1]);
  const CheckpointManifest m = read_manifest(step_dir);
  fmt::print("{}\n", step_dir);
  fmt::print("{}", describe(m));
  std::fflush(stdout);
  verify(step_dir);
  fmt::print("verified: {} shards, sizes and checksums match the manifest\n", m.shards.size());
  return 0;
}

}  // namespace shardlab::cli
