#include "engine/job/job_schema.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "engine/core/display_text.h"
#include "engine/core/error.h"

namespace shardlab::job_detail {

using nlohmann::json;

std::string join_path(const std::string& prefix, std::string_view key) {
  return prefix.empty() ? std::string(key) : prefix + "." + std::string(key);
}

namespace {

// ---------------------------------------------------------------------------------------------
// The schema: every field of a JobSpec with its key, in document order. Reading, writing and the
// list of known keys all come from this one function, so they cannot drift apart.
// A visitor provides field(key, value) and section(key, fn).

template <class V, class Job>
void visit_job(V& v, Job& job) {
  v.field("name", job.name);
  v.field("device", job.device);
  v.section("model", [&] {
    auto& m = job.model;
    v.field("kind", m.kind);
    v.field("seed", m.seed);
    v.section("mlp", [&] {
      v.field("input_dim", m.mlp.input_dim);
      v.field("hidden", m.mlp.hidden);
      v.field("num_classes", m.mlp.num_classes);
      v.field("activation", m.mlp.activation);
    });
    v.section("gpt", [&] {
      v.field("vocab_size", m.gpt.vocab_size);
      v.field("context", m.gpt.context);
      v.field("width", m.gpt.width);
      v.field("layers", m.gpt.layers);
      v.field("heads", m.gpt.heads);
      v.field("mlp_ratio", m.gpt.mlp_ratio);
    });
  });
  v.section("data", [&] {
    auto& d = job.data;
    v.field("dataset", d.dataset);
    v.field("path", d.path);
    v.field("corpus", d.corpus);
    v.field("train_limit", d.train_limit);
    v.field("eval_limit", d.eval_limit);
    v.field("eval_fraction", d.eval_fraction);
  });
  v.section("optimizer", [&] {
    auto& o = job.optimizer;
    v.field("name", o.name);
    v.field("lr", o.lr);
    v.field("weight_decay", o.weight_decay);
    v.field("momentum", o.momentum);
    v.field("nesterov", o.nesterov);
    v.field("beta1", o.beta1);
    v.field("beta2", o.beta2);
    v.field("eps", o.eps);
    v.field("alpha", o.alpha);
    v.field("initial_accumulator", o.initial_accumulator);
  });
  v.section("train", [&] {
    auto& t = job.train;
    v.field("steps", t.steps);
    v.field("epochs", t.epochs);
    v.field("batch_size", t.batch_size);
    v.field("eval_every", t.eval_every);
    v.field("eval_batches", t.eval_batches);
    v.field("log_every", t.log_every);
    v.field("seed", t.seed);
    v.field("accumulation_steps", t.accumulation_steps);
    v.field("clip_grad_norm", t.clip_grad_norm);
    v.field("checkpoint_dir", t.checkpoint_dir);
    v.field("init_model", t.init_model);
    v.field("checkpoint_every", t.checkpoint_every);
    v.field("keep_checkpoints", t.keep_checkpoints);
    v.field("threads", t.threads);
    v.section("schedule", [&] {
      v.field("kind", t.schedule.kind);
      v.field("warmup_steps", t.schedule.warmup_steps);
      v.field("min_lr_ratio", t.schedule.min_lr_ratio);
    });
    v.section("early_stopping", [&] {
      v.field("patience", t.early_stopping.patience);
      v.field("min_delta", t.early_stopping.min_delta);
    });
  });
  v.section("parallel", [&] {
    auto& p = job.parallel;
    v.field("strategy", p.strategy);
    v.field("world_size", p.world_size);
    v.field("backend", p.backend);
    v.field("bucket_mb", p.bucket_mb);
    v.field("overlap", p.overlap);
    v.field("fsdp_keep_params", p.fsdp_keep_params);
    v.field("timeout_s", p.timeout_s);
    v.field("pp", p.pp);
    v.field("tp", p.tp);
    v.field("dp", p.dp);
    v.field("micro_batches", p.micro_batches);
    v.field("schedule", p.schedule);
    v.field("pp_chunks", p.pp_chunks);
    v.field("pp_partition", p.pp_partition);
  });
  v.section("telemetry", [&] {
    v.field("address", job.telemetry.address);
    v.field("token_file", job.telemetry.token_file);
    v.field("teaching", job.telemetry.teaching);
    v.field("teaching_timeout_s", job.telemetry.teaching_timeout_s);
  });
}

// ---------------------------------------------------------------------------------------------
// Writing.

template <class Json>
class Writer {
 public:
  explicit Writer(Json& root) { stack_.push_back(&root); }
  template <class T>
  void field(const char* key, const T& value) {
    (*stack_.back())[key] = value;
  }
  template <class Fn>
  void section(const char* key, Fn&& fn) {
    Json& sub = (*stack_.back())[key] = Json::object();
    stack_.push_back(&sub);
    fn();
    stack_.pop_back();
  }

 private:
  std::vector<Json*> stack_;
};

// ---------------------------------------------------------------------------------------------
// Describing: each field's path, type and default, for the public table (job_fields.h).

class Describer {
 public:
  std::vector<JobField> fields;

  template <class T>
  void field(const char* key, const T& value) {
    JobField f;
    f.path = join_path(prefix_, key);
    f.type = type_of<T>();
    f.default_value = json(value);
    fields.push_back(std::move(f));
  }
  template <class Fn>
  void section(const char* key, Fn&& fn) {
    const std::string outer = prefix_;
    prefix_ = join_path(prefix_, key);
    fn();
    prefix_ = outer;
  }

 private:
  template <class T>
  static FieldType type_of() {
    if constexpr (std::is_same_v<T, std::string>)
      return FieldType::string;
    else if constexpr (std::is_same_v<T, bool>)
      return FieldType::boolean;
    else if constexpr (std::is_same_v<T, double>)
      return FieldType::number;
    else if constexpr (std::is_same_v<T, int64_t>)
      return FieldType::integer;
    else if constexpr (std::is_same_v<T, uint64_t>)
      return FieldType::unsigned_integer;
    else if constexpr (std::is_same_v<T, std::vector<int64_t>>)
      return FieldType::integer_list;
    else if constexpr (std::is_same_v<T, std::vector<std::string>>)
      return FieldType::string_list;
    else
      static_assert(sizeof(T) == 0, "a JobSpec field of a type the table has no FieldType for");
  }

  std::string prefix_;
};

// ---------------------------------------------------------------------------------------------
// Reading: types are checked here, values in validate().

// "string \"abc\"", "3.5", "array": what a value is, for "expected X, got Y" (a string as
// display_text() shows it).
std::string describe(const json& j) {
  if (j.is_string()) return fmt::format("string \"{}\"", display_text(j.get<std::string>(), 40));
  if (j.is_number() || j.is_boolean()) return j.dump();
  return j.type_name();
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string unknown_field_message(const std::string& key, const std::vector<std::string>& known) {
  const std::string* best = nullptr;
  size_t best_distance = std::numeric_limits<size_t>::max();
  for (const auto& k : known) {
    const size_t d = edit_distance(key, k);
    if (d < best_distance) best = &k, best_distance = d;
  }
  if (best && best_distance <= 1 + key.size() / 4)
    return fmt::format("unknown field (did you mean \"{}\"?)", *best);
  return "unknown field";
}

class Reader {
 public:
  Reader(const json& doc, std::vector<FieldError>& errors) : errors_(errors) {
    if (doc.is_object()) {
      frames_.push_back({&doc, "", {}});
    } else {
      errors_.push_back({"", "a job must be a JSON object, got " + describe(doc)});
      frames_.push_back({nullptr, "", {}});
    }
  }
  // Reports keys at the top level that the schema does not know.
  void finish() { close_frame(); }

  template <class T>
  void field(const char* key, T& value) {
    Frame& f = frames_.back();
    f.known.emplace_back(key);
    if (!f.obj) return;
    const auto it = f.obj->find(key);
    if (it == f.obj->end()) return;
    read(*it, join_path(f.path, key), value);
  }

  template <class Fn>
  void section(const char* key, Fn&& fn) {
    Frame& f = frames_.back();
    f.known.emplace_back(key);
    const std::string path = join_path(f.path, key);
    const json* sub = nullptr;
    if (f.obj) {
      const auto it = f.obj->find(key);
      if (it != f.obj->end()) {
        if (it->is_object())
          sub = &*it;
        else
          fail(path, "expected an object, got " + describe(*it));
      }
    }
    frames_.push_back({sub, path, {}});
    fn();
    close_frame();
    frames_.pop_back();
  }

 private:
  struct Frame {
    const json* obj;  // null when the section is absent or not an object
    std::string path;
    std::vector<std::string> known;
  };

  void fail(std::string field, std::string message) {
    errors_.push_back({std::move(field), std::move(message)});
  }

  void close_frame() {
    const Frame& f = frames_.back();
    if (!f.obj) return;
    for (const auto& item : f.obj->items()) {
      if (std::find(f.known.begin(), f.known.end(), item.key()) == f.known.end())
        fail(join_path(f.path, display_text(item.key())),
             unknown_field_message(item.key(), f.known));
    }
  }

  void read(const json& j, const std::string& path, std::string& out) {
    if (j.is_string())
      out = j.get<std::string>();
    else
      fail(path, "expected a string, got " + describe(j));
  }

  void read(const json& j, const std::string& path, bool& out) {
    if (j.is_boolean())
      out = j.get<bool>();
    else
      fail(path, "expected true or false, got " + describe(j));
  }

  void read(const json& j, const std::string& path, double& out) {
    if (!j.is_number()) return fail(path, "expected a number, got " + describe(j));
    const double v = j.get<double>();
    if (!std::isfinite(v)) return fail(path, "must be a finite number, got " + j.dump());
    out = v;
  }

  // Integers may be written as 3000 or 3e3; 3.5 is an error.
  void read(const json& j, const std::string& path, int64_t& out) {
    constexpr auto kMax = std::numeric_limits<int64_t>::max();
    if (j.is_number_unsigned()) {
      if (j.get<uint64_t>() > static_cast<uint64_t>(kMax))
        return fail(path, "integer out of range, got " + j.dump());
      out = j.get<int64_t>();
    } else if (j.is_number_integer()) {
      out = j.get<int64_t>();
    } else if (j.is_number_float() && integral_in(j.get<double>(), -9.2e18, 9.2e18)) {
      out = static_cast<int64_t>(j.get<double>());
    } else {
      fail(path, "expected an integer, got " + describe(j));
    }
  }

  void read(const json& j, const std::string& path, uint64_t& out) {
    if (j.is_number_unsigned()) {
      out = j.get<uint64_t>();
    } else if (j.is_number_integer()) {
      // A parser stores 1 as unsigned, but a document built in C++ ({"seed", 1}) as signed.
      if (j.get<int64_t>() >= 0)
        out = static_cast<uint64_t>(j.get<int64_t>());
      else
        fail(path, "must be >= 0, got " + j.dump());
    } else if (j.is_number_float() && integral_in(j.get<double>(), 0, 1.8e19)) {
      out = static_cast<uint64_t>(j.get<double>());
    } else {
      fail(path, "expected a non-negative integer, got " + describe(j));
    }
  }

  template <class T>
  void read(const json& j, const std::string& path, std::vector<T>& out) {
    if (!j.is_array()) return fail(path, "expected an array, got " + describe(j));
    const size_t errors_before = errors_.size();
    std::vector<T> values(j.size());
    for (size_t i = 0; i < j.size(); ++i) read(j[i], fmt::format("{}[{}]", path, i), values[i]);
    if (errors_.size() == errors_before) out = std::move(values);
  }

  static bool integral_in(double v, double lo, double hi) {
    return std::isfinite(v) && v == std::trunc(v) && v >= lo && v <= hi;
  }

  std::vector<FieldError>& errors_;
  std::vector<Frame> frames_;
};

}  // namespace

template <class Json>
Json write_job(const JobSpec& job) {
  Json doc = Json::object();
  Writer<Json> writer(doc);
  visit_job(writer, job);
  return doc;
}

template json write_job<json>(const JobSpec& job);
template nlohmann::ordered_json write_job<nlohmann::ordered_json>(const JobSpec& job);

std::vector<JobField> schema_fields() {
  Describer describer;
  const JobSpec defaults;
  visit_job(describer, defaults);
  return std::move(describer.fields);
}

void read_job(const json& doc, JobSpec& job, std::vector<FieldError>& errors) {
  Reader reader(doc, errors);
  visit_job(reader, job);
  reader.finish();
}

}  // namespace shardlab::job_detail
