// The job field table: the schema's paths, types and defaults (job_schema.cpp) with each field's
// choices and the settings that use it.
#include "engine/device/device.h"
#include "engine/job/job_fields.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "engine/core/error.h"
#include "engine/job/job_schema.h"
#include "engine/optim/registry.h"
#include "engine/topology/parallel_config.h"

namespace shardlab {

namespace {

using Op = FieldTest::Op;

FieldTest test(std::string path, Op op, std::vector<std::string> values = {},
               int64_t threshold = 0) {
  FieldTest t;
  t.path = std::move(path);
  t.op = op;
  t.values = std::move(values);
  t.threshold = threshold;
  return t;
}
FieldTest is(std::string path, std::vector<std::string> values) {
  return test(std::move(path), Op::one_of, std::move(values));
}
FieldTest is_not(std::string path, std::vector<std::string> values) {
  return test(std::move(path), Op::none_of, std::move(values));
}
FieldTest above(std::string path, int64_t threshold) {
  return test(std::move(path), Op::above, {}, threshold);
}
FieldTest not_empty(std::string path) {
  return test(std::move(path), Op::not_empty);
}

// What the schema cannot say: choices, uses and fixed ranges, by path.
struct Extra {
  std::vector<std::string> choices;
  std::vector<FieldTest> used_when;
  std::optional<int64_t> min, max;
};

Extra one_of(std::vector<std::string> choices, std::vector<FieldTest> used_when = {}) {
  Extra e;
  e.choices = std::move(choices);
  e.used_when = std::move(used_when);
  return e;
}
Extra used(std::vector<FieldTest> used_when) {
  return one_of({}, std::move(used_when));
}
Extra range(int64_t min, int64_t max) {
  Extra e;
  e.min = min;
  e.max = max;
  return e;
}

Extra with_range(Extra e, int64_t min, int64_t max) {
  e.min = min;
  e.max = max;
  return e;
}

std::map<std::string, Extra> extras() {
  const auto mlp = is("model.kind", {"mlp"});
  const auto gpt = is("model.kind", {"gpt"});
  const auto chars = is("data.dataset", {"chars"});
  const auto parallel = is_not("parallel.strategy", {"none"});
  const auto pipeline = above("parallel.pp", 1);
  const auto checkpoints = not_empty("train.checkpoint_dir");
  std::map<std::string, Extra> e = {
      {"device", one_of(device_kind_names())},
      {"model.kind", one_of({"mlp", "gpt"})},
      {"model.mlp.activation", one_of({"relu", "gelu"}, {mlp})},
      {"data.dataset", one_of({"fashion-mnist", "chars"})},
      {"data.path", used({is("data.dataset", {"fashion-mnist"})})},
      {"data.corpus", used({chars})},
      {"data.eval_fraction", used({chars})},
      {"optimizer.name", one_of(optimizer_names())},
      {"train.schedule.kind", one_of({"constant", "warmup_cosine"})},
      {"train.schedule.warmup_steps", used({is("train.schedule.kind", {"warmup_cosine"})})},
      {"train.schedule.min_lr_ratio", used({is("train.schedule.kind", {"warmup_cosine"})})},
      {"train.checkpoint_every", used({checkpoints})},
      {"train.keep_checkpoints", used({checkpoints})},
      {"train.threads", range(0, kMaxThreads)},
      {"train.early_stopping.min_delta", used({above("train.early_stopping.patience", 0)})},
      {"parallel.strategy", one_of(strategy_names())},
      {"parallel.world_size", range(1, kMaxWorldSize)},
      {"parallel.backend", one_of({"threads", "mpi"}, {parallel})},
      {"parallel.bucket_mb", used({is_not("parallel.strategy", {"none", "fsdp"})})},
      {"parallel.overlap", used({parallel})},
      {"parallel.fsdp_keep_params", used({is("parallel.strategy", {"fsdp"})})},
      {"parallel.timeout_s", used({parallel})},
      {"parallel.dp", range(-1, kMaxWorldSize)},  // -1: world_size / (pp x tp)
      {"parallel.micro_batches", used({above("parallel.pp", 1), above("parallel.tp", 1)})},
      {"parallel.schedule", one_of({"gpipe", "1f1b", "interleaved"}, {pipeline})},
      {"parallel.pp_chunks",
       with_range(used({is("parallel.schedule", {"interleaved"})}), 1, kMaxPipelineChunks)},
      {"parallel.pp_partition", one_of({"uniform", "balanced"}, {pipeline})},
      {"telemetry.token_file", used({not_empty("telemetry.address")})},
  };
  for (const auto& key : {"mlp.input_dim", "mlp.hidden", "mlp.num_classes"})
    e[std::string("model.") + key].used_when = {mlp};
  for (const auto& key : {"vocab_size", "context", "width", "layers", "heads", "mlp_ratio"})
    e[std::string("model.gpt.") + key].used_when = {gpt};
  // Each hyper-parameter by the optimizers that read it (the registry's).
  for (const HyperParameter& h : hyper_parameters()) {
    const auto users = optimizers_reading(h.name);
    if (users != optimizer_names())
      e[std::string("optimizer.") + h.name].used_when = {is("optimizer.name", users)};
  }
  return e;
}

std::vector<JobField> build() {
  std::vector<JobField> fields = job_detail::schema_fields();
  auto e = extras();
  for (JobField& f : fields) {
    const auto it = e.find(f.path);
    if (it == e.end()) continue;
    f.choices = std::move(it->second.choices);
    f.used_when = std::move(it->second.used_when);
    f.min = it->second.min;
    f.max = it->second.max;
    e.erase(it);
  }
  SL_ENFORCE_T(InternalError, e.empty(), "job_fields: '{}' is not a job field",
               e.empty() ? "" : e.begin()->first);
  return fields;
}

template <class Json>
bool passes(const FieldTest& t, const Json& doc) {
  const JobField* decider = find_job_field(t.path);
  SL_ENFORCE_T(InternalError, decider != nullptr, "job_fields: no field '{}'", t.path);
  const Json* v = &doc;
  for (size_t start = 0; v;) {
    const size_t dot = t.path.find('.', start);
    const std::string key = t.path.substr(start, dot - start);
    const auto it = v->is_object() ? v->find(key) : v->end();
    v = v->is_object() && it != v->end() ? &*it : nullptr;
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  const Json fallback(decider->default_value);
  if (t.op == Op::above) {
    if (!v || !v->is_number()) v = &fallback;
    // The integer part, compared as a double: the document may hold any number (the app asks about
    // whatever is typed), and converting one beyond int64's range to int64 is undefined.
    return std::trunc(v->template get<double>()) > static_cast<double>(t.threshold);
  }
  if (!v || !v->is_string()) v = &fallback;
  const std::string s = v->template get<std::string>();
  switch (t.op) {
    case Op::one_of:
      return std::find(t.values.begin(), t.values.end(), s) != t.values.end();
    case Op::none_of:
      return std::find(t.values.begin(), t.values.end(), s) == t.values.end();
    default:
      return !s.empty();
  }
}

template <class Json>
bool used(const JobField& field, const Json& doc) {
  if (field.used_when.empty()) return true;
  return std::any_of(field.used_when.begin(), field.used_when.end(),
                     [&](const FieldTest& t) { return passes(t, doc); });
}

}  // namespace

const std::vector<JobField>& job_fields() {
  static const std::vector<JobField> fields = build();
  return fields;
}

const JobField* find_job_field(std::string_view path) {
  for (const JobField& f : job_fields())
    if (f.path == path) return &f;
  return nullptr;
}

const std::vector<std::string>& field_choices(std::string_view path) {
  static const std::vector<std::string> none;
  const JobField* f = find_job_field(path);
  return f ? f->choices : none;
}

bool field_used(const JobField& field, const nlohmann::json& doc) {
  return used(field, doc);
}

bool field_used(const JobField& field, const nlohmann::ordered_json& doc) {
  return used(field, doc);
}

const std::vector<std::string>& data_parallel_strategies() {
  static const std::vector<std::string> names = {"ddp", "zero1", "zero2"};
  return names;
}

}  // namespace shardlab
