// shardlab checkpoint inspect DIR [--json]: what a sharded checkpoint holds (its manifest) and
// whether every shard is intact (size and CRC-32 against the manifest).
//
// shardlab checkpoint consolidate DIR OUT [--force]: the full model's parameters, gathered from the
// shards of whatever strategy and layout wrote them, as one model file (engine/model/model_file.h)
// that a job starts from with train.init_model.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>

#include "engine/checkpoint/checkpoint_store.h"
#include "engine/cli/args.h"
#include "engine/cli/command_spec.h"
#include "engine/cli/commands.h"
#include "engine/cli/json_output.h"
#include "engine/core/display_text.h"
#include "engine/core/error.h"
#include "engine/model/model_file.h"
#include "engine/checkpoint/rank_checkpoint.h"

namespace shardlab::cli {

namespace {

constexpr const char* kUsage =
    "checkpoint needs 'inspect DIR' or 'consolidate DIR OUT [--force]', e.g. shardlab checkpoint "
    "inspect runs/ckpt (DIR: a checkpoint directory or one of its step-* directories)";

// --json: the manifest and the verification as one document (fields: command_table.cpp).
Json inspect_json(const std::string& step_dir, const CheckpointManifest& m) {
  Json shards = Json::array();
  uint64_t total = 0;
  for (const ShardEntry& s : m.shards) {
    shards.push_back(Json{{"rank", s.rank}, {"file", s.file}, {"bytes", s.bytes}});
    total += s.bytes;
  }
  return Json{{"step_dir", step_dir},
              {"step", m.step},
              {"strategy", m.strategy},
              {"world_size", m.world_size},
              {"pp", m.pp},
              {"tp", m.tp},
              {"dp", m.dp},
              {"format_version", m.format_version},
              {"layout", m.layout},
              {"shards", shards},
              {"shards_bytes", total},
              {"verified", true}};
}

int inspect(const std::string& dir, bool json) {
  const std::string step_dir = find_checkpoint(dir);
  const CheckpointManifest m = read_manifest(step_dir);
  if (json) {
    verify(step_dir);  // throws on a mismatch: no document, exit 1
    print_json(inspect_json(step_dir, m));
    return 0;
  }
  fmt::print("{}\n", step_dir);
  fmt::print("{}", describe(m));
  std::fflush(stdout);
  verify(step_dir);
  fmt::print("verified: {} shards, sizes and checksums match the manifest\n", m.shards.size());
  return 0;
}

int consolidate(const std::string& dir, const std::string& out, bool force) {
  std::error_code ec;
  SL_ENFORCE(!std::filesystem::is_directory(out, ec),
             "consolidate: {} is a directory; name the model file to write, e.g. {}/model.slm", out,
             out);
  SL_ENFORCE(force || !std::filesystem::exists(out, ec),
             "consolidate: {} exists; pass --force to replace it", out);
  const std::string step_dir = find_checkpoint(dir);
  CheckpointManifest m;
  const std::vector<float> params = read_checkpoint_tensor(step_dir, "param", &m);
  SL_ENFORCE_T(FormatError,
               m.layout.contains("param_fingerprint") && m.layout["param_fingerprint"].is_string(),
               "{}: the manifest's layout has no param_fingerprint", step_dir);
  uint32_t fingerprint = 0;
  const std::string hex = m.layout["param_fingerprint"].get<std::string>();
  try {
    size_t used = 0;
    fingerprint = static_cast<uint32_t>(std::stoul(hex, &used, 16));
    SL_ENFORCE(used == hex.size() && hex.size() == 8, "not 8 hex digits");
  } catch (const std::exception&) {
    SL_THROW(FormatError, "{}: param_fingerprint '{}' is not 8 hex digits", step_dir,
             display_text(hex));
  }
  if (is_safetensors_path(out)) {
    // Named, shaped tensors (engine/model/safetensors.h), names and shapes from the manifest.
    const ParamLayout layout = checkpoint_param_layout(m, step_dir);
    save_model_file(out, layout, params,
                    {{"shardlab.step", std::to_string(m.step)},
                     {"shardlab.strategy", m.strategy},
                     {"shardlab.topology", fmt::format("{}x{}x{}", m.pp, m.tp, m.dp)},
                     {"shardlab.world_size", std::to_string(m.world_size)},
                     {"shardlab.model", m.layout.contains("model") && m.layout["model"].is_string()
                                            ? m.layout["model"].get<std::string>()
                                            : std::string()},
                     {"shardlab.param_fingerprint", hex},
                     {"shardlab.checkpoint", step_dir}});
  } else {
    write_model_file(out, fingerprint, params);
  }
  fmt::print(
      "consolidated step {} of {} ({} on {} ranks, {}x{}x{}): {} parameters -> {}\n"
      "start a job from it with --set train.init_model={}\n",
      m.step, step_dir, display_text(m.strategy), m.world_size, m.pp, m.tp, m.dp, params.size(),
      out, out);
  return 0;
}

int checkpoint_inspect_command(const std::vector<std::string>& argv) {
  const Args args(argv, arg_spec("checkpoint inspect"));
  if (args.positional().size() != 1) SL_THROW(UsageError, "{}", kUsage);
  return inspect(args.positional()[0], args.has("--json"));
}

int checkpoint_consolidate_command(const std::vector<std::string>& argv) {
  const Args args(argv, arg_spec("checkpoint consolidate"));
  const auto& pos = args.positional();
  if (pos.size() != 2) SL_THROW(UsageError, "{}", kUsage);
  return consolidate(pos[0], pos[1], args.has("--force"));
}

}  // namespace

int checkpoint_command(const std::vector<std::string>& argv) {
  const std::vector<std::string> rest(argv.begin() + (argv.empty() ? 0 : 1), argv.end());
  if (!argv.empty() && argv[0] == "inspect") return checkpoint_inspect_command(rest);
  if (!argv.empty() && argv[0] == "consolidate") return checkpoint_consolidate_command(rest);
  SL_THROW(UsageError, "{}", kUsage);
}

}  // namespace shardlab::cli
