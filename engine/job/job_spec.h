// JobSpec: one training job as the CLI and the GUI both read it from a JSON file, validated in one
// place. The document's sections map onto the config structs and its keys are their field names:
//
//   { "name": "...", "model": {..., "mlp": {...}, "gpt": {...}}, "data": {...},
//     "optimizer": {...}, "train": {..., "schedule": {...}, "early_stopping": {...}},
//     "parallel": {"strategy": ..., "world_size": ..., "backend": ..., ...} }
//
// Missing sections and fields take the struct defaults (so a job without "parallel" runs in one
// process). Everything else is an error naming the dotted field path: unknown keys (with the
// closest known key suggested), wrong JSON types, values out of range, and fields that the chosen
// model, dataset, schedule, optimizer or parallel strategy would not use but that are set to a
// non-default value (nothing in a job file is silently ignored).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstddef>
#include <string>
#include <vector>

#include "engine/data/data_config.h"
#include "engine/model/model_config.h"
#include "engine/optim/optimizer_config.h"
#include "engine/topology/parallel_config.h"
#include "engine/train/train_config.h"

namespace shardlab {

// Where a job's ranks stream telemetry (net/): `shardlab run` and `shardlab worker` use it unless
// --telemetry / --token-file say otherwise.
struct TelemetryConfig {
  std::string address;     // "HOST:PORT" of a collector (`shardlab monitor`); "" streams nowhere
  std::string token_file;  // file holding the job's token ("" : SHARDLAB_TELEMETRY_TOKEN)
  // Teaching mode (engine/telemetry/teaching_gate.h): every rank is held after each phase until the
  // viewer steps on; threads backend, CPU and a sharded strategy only.
  bool teaching = false;
  double teaching_timeout_s = 30;  // held with no viewer this long: the run goes on
};

struct JobSpec {
  std::string name = "job";
  std::string device = "cpu";  // "cpu" | "cuda": where parameters, state and activations live
  ModelConfig model;
  DataConfig data;
  OptimizerConfig optimizer;
  TrainConfig train;        // with the LR schedule and early stopping
  ParallelConfig parallel;  // strategy and ranks ("none": one process)
  TelemetryConfig telemetry;
};

// Same value in every field (compares the full JSON documents).
bool operator==(const JobSpec& a, const JobSpec& b);

// One problem with a job, for showing beside a field.
struct FieldError {
  std::string field;    // dotted path: "optimizer.lr", "model.mlp.hidden[1]"; "" for the document
  std::string message;  // "must be > 0, got -1"
  // "optimizer.lr: must be > 0, got -1"
  std::string to_string() const;
};

// Every value check on an already-typed job (ranges, choices, cross-field rules, fields not used by
// the chosen kinds), in document order. Empty when the job is valid.
std::vector<FieldError> validate(const JobSpec& job);

// Reads `doc` into a JobSpec and returns every problem: unknown keys and wrong types first, then
// validate()'s findings for the fields that did read. `out` (optional) receives the job as read,
// with defaults where a value was missing or unusable.
std::vector<FieldError> check_job_json(const nlohmann::json& doc, JobSpec* out = nullptr);

// Parse and validate; throws InvalidArgument whose message is the first problem
// ("optimizer.lrr: unknown field (did you mean \"lr\"?)"), plus a count of any others.
JobSpec job_from_json(const nlohmann::json& doc);

// The full document, every field present (defaults included). job_from_json(job_to_json(j)) == j
// for any valid j.
nlohmann::json job_to_json(const JobSpec& job);

// Parses job text as JSON, without validating it. Throws FormatError "SOURCE:LINE:COL: invalid
// JSON: ..." when it is not well-formed, "SOURCE: a.b: key appears more than once" when an
// object repeats a key (plain nlohmann would keep the last one silently), and, checked on the text
// before parsing (engine/core/json_limits.h), "SOURCE: nested deeper than 64 levels" and
// "SOURCE: optimizer.lr: 1e400 is out of range (not a finite number)".
nlohmann::json parse_job_json(const std::string& text, const std::string& source = "job");

// The largest job file read_job_json (and the app's File > Open) accepts: a job is a few KiB, and
// a path such as /dev/zero never ends.
inline constexpr size_t kMaxJobFileBytes = size_t{16} << 20;  // 16 MiB

// Reads a job file and parses it with parse_job_json (SOURCE is the path). Throws IoError naming
// the path when it cannot be read, FormatError when it holds more than kMaxJobFileBytes.
nlohmann::json read_job_json(const std::string& path);

// read_job_json, then each override in order (see overrides.h), then job_from_json.
JobSpec load_job(const std::string& path, const std::vector<std::string>& overrides = {});

// Writes job_to_json(job), indented, to `path`; throws IoError when it cannot.
void save_job(const JobSpec& job, const std::string& path);

}  // namespace shardlab
