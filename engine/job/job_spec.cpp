#include "engine/job/job_spec.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include "engine/core/error.h"
#include "engine/job/overrides.h"
#include "engine/optim/validate.h"

namespace shardlab {

using nlohmann::json;

namespace {

// ---------------------------------------------------------------------------------------------
// The schema: every field of a JobSpec with its key, in document order. Reading, writing and the
// list of known keys all come from this one function, so they cannot drift apart.
// A visitor provides field(key, value) and section(key, fn).

template <class V, class Job>
void visit_job(V& v, Job& job) {
  v.field("name", job.name);
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
}

std::string join_path(const std::string& prefix, std::string_view key) {
  return prefix.empty() ? std::string(key) : prefix + "." + std::string(key);
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

template <class Json>
Json write_job(const JobSpec& job) {
  Json doc = Json::object();
  Writer<Json> writer(doc);
  visit_job(writer, job);
  return doc;
}

// ---------------------------------------------------------------------------------------------
// Reading: types are checked here, values in validate().

// "string \"abc\"", "3.5", "array": what a value is, for "expected X, got Y".
std::string describe(const json& j) {
  if (j.is_string()) {
    std::string s = j.get<std::string>();
    if (s.size() > 40) s = s.substr(0, 37) + "...";
    return fmt::format("string \"{}\"", s);
  }
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
        fail(join_path(f.path, item.key()), unknown_field_message(item.key(), f.known));
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
    } else if (j.is_number_integer()) {  // a negative integer
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

// ---------------------------------------------------------------------------------------------
// Validation.

const std::vector<std::string> kModelKinds = {"mlp", "gpt"};
const std::vector<std::string> kDatasets = {"fashion-mnist", "chars"};
const std::vector<std::string> kActivations = {"relu", "gelu"};
const std::vector<std::string> kScheduleKinds = {"constant", "warmup_cosine"};

// Fields that validate_optimizer_config() (the optimizer module's own rules: names, ranges and
// the zero-default fields momentum, nesterov, initial_accumulator) does not reject when set for an
// optimizer that ignores them, with the optimizers that read them.
const std::map<std::string, std::set<std::string>> kOptimizerFieldUsers = {
    {"beta1", {"adam", "adamw"}},
    {"beta2", {"adam", "adamw"}},
    {"eps", {"adam", "adamw", "rmsprop", "adagrad"}},
    {"alpha", {"rmsprop"}},
};

std::string quoted_list(const std::vector<std::string>& items) {
  std::string s;
  for (const auto& item : items) s += (s.empty() ? "\"" : ", \"") + item + "\"";
  return s;
}

bool contains(const std::vector<std::string>& items, const std::string& x) {
  return std::find(items.begin(), items.end(), x) != items.end();
}

class Checker {
 public:
  explicit Checker(const JobSpec& job)
      : doc_(write_job<json>(job)), defaults_(write_job<json>(JobSpec{})) {}

  std::vector<FieldError> take() { return std::move(errors_); }

  void fail(std::string field, std::string message) {
    errors_.push_back({std::move(field), std::move(message)});
  }

  template <class T>
  void at_least(const std::string& field, T value, T min) {
    if (!(value >= min)) fail(field, fmt::format("must be >= {}, got {}", min, value));
  }
  // lo <= value <= hi.
  void in_range(const std::string& field, double value, double lo, double hi) {
    if (!(value >= lo && value <= hi))
      fail(field, fmt::format("must be in [{}, {}], got {}", lo, hi, value));
  }
  bool one_of(const std::string& field, const std::string& value,
              const std::vector<std::string>& choices) {
    if (contains(choices, value)) return true;
    fail(field, fmt::format("must be one of {}, got \"{}\"", quoted_list(choices), value));
    return false;
  }

  // True when the field at dotted `path` differs from its default.
  bool is_set(const std::string& path) const {
    const json::json_pointer ptr = pointer(path);
    return doc_.at(ptr) != defaults_.at(ptr);
  }
  // Reports every field of `section` (a dotted path) that differs from its default.
  void unused_section(const std::string& section, const std::string& why) {
    const json::json_pointer ptr = pointer(section);
    for (const auto& item : doc_.at(ptr).items())
      if (item.value() != defaults_.at(ptr)[item.key()]) fail(section + "." + item.key(), why);
  }
  void unused_field(const std::string& path, const std::string& why) {
    if (is_set(path)) fail(path, why);
  }

 private:
  // "train.schedule" -> "/train/schedule".
  static json::json_pointer pointer(const std::string& dotted) {
    std::string s = "/";
    s += dotted;
    std::replace(s.begin(), s.end(), '.', '/');
    return json::json_pointer(s);
  }

  json doc_, defaults_;
  std::vector<FieldError> errors_;
};

void check_model(Checker& c, const JobSpec& job) {
  const ModelConfig& m = job.model;
  if (!c.one_of("model.kind", m.kind, kModelKinds)) return;
  if (m.kind == "mlp") {
    c.at_least<int64_t>("model.mlp.input_dim", m.mlp.input_dim, 1);
    for (size_t i = 0; i < m.mlp.hidden.size(); ++i)
      c.at_least<int64_t>(fmt::format("model.mlp.hidden[{}]", i), m.mlp.hidden[i], 1);
    c.at_least<int64_t>("model.mlp.num_classes", m.mlp.num_classes, 2);
    c.one_of("model.mlp.activation", m.mlp.activation, kActivations);
    if (job.data.dataset == "fashion-mnist") {
      // The data decides these; a different value could only be a mistake.
      if (m.mlp.input_dim != 784)
        c.fail(
            "model.mlp.input_dim",
            fmt::format("must be 784 for fashion-mnist (28x28 images), got {}", m.mlp.input_dim));
      if (m.mlp.num_classes != 10)
        c.fail("model.mlp.num_classes",
               fmt::format("must be 10 for fashion-mnist, got {}", m.mlp.num_classes));
    }
    c.unused_section("model.gpt", "not used by model kind mlp");
  } else {
    const GptConfig& g = m.gpt;
    c.at_least<int64_t>("model.gpt.vocab_size", g.vocab_size, 0);
    c.at_least<int64_t>("model.gpt.context", g.context, 1);
    c.at_least<int64_t>("model.gpt.width", g.width, 1);
    c.at_least<int64_t>("model.gpt.layers", g.layers, 1);
    c.at_least<int64_t>("model.gpt.heads", g.heads, 1);
    c.at_least<int64_t>("model.gpt.mlp_ratio", g.mlp_ratio, 1);
    if (g.heads >= 1 && g.width >= 1 && g.width % g.heads != 0)
      c.fail("model.gpt.heads",
             fmt::format("must divide model.gpt.width ({}), got {}", g.width, g.heads));
    c.unused_section("model.mlp", "not used by model kind gpt");
  }
}

void check_data(Checker& c, const JobSpec& job) {
  const DataConfig& d = job.data;
  if (c.one_of("data.dataset", d.dataset, kDatasets)) {
    const std::string& kind = job.model.kind;
    if (kind == "mlp" && d.dataset != "fashion-mnist")
      c.fail("data.dataset",
             fmt::format("model kind mlp needs \"fashion-mnist\", got \"{}\"", d.dataset));
    if (kind == "gpt" && d.dataset != "chars")
      c.fail("data.dataset", fmt::format("model kind gpt needs \"chars\", got \"{}\"", d.dataset));
    if (d.dataset == "fashion-mnist") {
      if (d.path.empty()) c.fail("data.path", "must not be empty");
      c.unused_field("data.corpus", "not used by dataset fashion-mnist");
      c.unused_field("data.eval_fraction",
                     "not used by dataset fashion-mnist (it has its own test set)");
    } else {
      c.unused_field("data.path", "not used by dataset chars (list text files in data.corpus)");
      for (size_t i = 0; i < d.corpus.size(); ++i)
        if (d.corpus[i].empty()) c.fail(fmt::format("data.corpus[{}]", i), "must not be empty");
      if (!(d.eval_fraction > 0 && d.eval_fraction < 1))
        c.fail("data.eval_fraction", fmt::format("must be in (0, 1), got {}", d.eval_fraction));
    }
  }
  c.at_least<int64_t>("data.train_limit", d.train_limit, 0);
  c.at_least<int64_t>("data.eval_limit", d.eval_limit, 0);
}

void check_optimizer(Checker& c, const OptimizerConfig& o) {
  try {
    validate_optimizer_config(o);
  } catch (const InvalidArgument& e) {
    // Its messages read "optimizer.<field>: <problem>"; it stops at the first problem.
    const std::string what = e.what();
    const size_t colon = what.find(": ");
    if (what.rfind("optimizer.", 0) == 0 && colon != std::string::npos)
      c.fail(what.substr(0, colon), what.substr(colon + 2));
    else
      c.fail("optimizer", what);
    return;
  }
  for (const auto& [key, users] : kOptimizerFieldUsers)
    if (!users.count(o.name)) c.unused_field("optimizer." + key, "not used by " + o.name);
}

void check_train(Checker& c, const TrainConfig& t) {
  c.at_least<int64_t>("train.steps", t.steps, 0);
  c.at_least<int64_t>("train.epochs", t.epochs, 0);
  if (t.steps == 0 && t.epochs == 0)
    c.fail("train.steps", "set train.steps or train.epochs (both are 0)");
  if (t.steps > 0 && t.epochs != 0)
    c.fail("train.epochs", "not used when train.steps is set (set one of the two)");
  c.at_least<int64_t>("train.batch_size", t.batch_size, 1);
  c.at_least<int64_t>("train.eval_every", t.eval_every, 0);
  c.at_least<int64_t>("train.eval_batches", t.eval_batches, 0);
  c.at_least<int64_t>("train.log_every", t.log_every, 1);

  const ScheduleConfig& s = t.schedule;
  if (c.one_of("train.schedule.kind", s.kind, kScheduleKinds)) {
    if (s.kind == "constant") {
      c.unused_field("train.schedule.warmup_steps", "not used by schedule constant");
      c.unused_field("train.schedule.min_lr_ratio", "not used by schedule constant");
    } else {
      c.at_least<int64_t>("train.schedule.warmup_steps", s.warmup_steps, 0);
      c.in_range("train.schedule.min_lr_ratio", s.min_lr_ratio, 0, 1);
    }
  }

  const EarlyStoppingConfig& e = t.early_stopping;
  c.at_least<int64_t>("train.early_stopping.patience", e.patience, 0);
  c.at_least("train.early_stopping.min_delta", e.min_delta, 0.0);
  if (e.patience == 0) {
    c.unused_field("train.early_stopping.min_delta", "not used when patience is 0");
  } else if (e.patience > 0 && t.eval_every == 0) {
    c.fail("train.early_stopping.patience",
           "needs train.eval_every > 0 (evaluations during training)");
  }
}

// True when one dotted path is the other or lies inside it ("a.b" and "a.b.c" or "a.b[2]").
bool overlaps(const std::string& a, const std::string& b) {
  const std::string& shorter = a.size() <= b.size() ? a : b;
  const std::string& longer = a.size() <= b.size() ? b : a;
  if (shorter.empty()) return true;
  if (longer.compare(0, shorter.size(), shorter) != 0) return false;
  return longer.size() == shorter.size() || longer[shorter.size()] == '.' ||
         longer[shorter.size()] == '[';
}

// 1-based line and column of the 1-based byte offset `byte` in `text`.
std::pair<size_t, size_t> line_col(const std::string& text, size_t byte) {
  const size_t end = std::min(byte == 0 ? 0 : byte - 1, text.size());
  size_t line = 1, line_start = 0;
  for (size_t i = 0; i < end; ++i)
    if (text[i] == '\n') ++line, line_start = i + 1;
  return {line, end - line_start + 1};
}

}  // namespace

// -----------------------------------------------------------------------------------------------

bool operator==(const JobSpec& a, const JobSpec& b) {
  return job_to_json(a) == job_to_json(b);
}

std::string FieldError::to_string() const {
  return field.empty() ? message : field + ": " + message;
}

std::vector<FieldError> validate(const JobSpec& job) {
  Checker c(job);
  if (job.name.empty()) c.fail("name", "must not be empty");
  check_model(c, job);
  check_data(c, job);
  check_optimizer(c, job.optimizer);
  check_train(c, job.train);
  return c.take();
}

std::vector<FieldError> check_job_json(const json& doc, JobSpec* out) {
  JobSpec job;
  std::vector<FieldError> errors;
  Reader reader(doc, errors);
  visit_job(reader, job);
  reader.finish();
  // A field that failed to read holds its default; leave out what that would cause.
  const size_t structural = errors.size();
  for (auto& e : validate(job)) {
    const bool shadowed =
        std::any_of(errors.begin(), errors.begin() + structural,
                    [&](const FieldError& s) { return overlaps(s.field, e.field); });
    if (!shadowed) errors.push_back(std::move(e));
  }
  if (out) *out = std::move(job);
  return errors;
}

JobSpec job_from_json(const json& doc) {
  JobSpec job;
  const auto errors = check_job_json(doc, &job);
  if (!errors.empty()) {
    const size_t more = errors.size() - 1;
    SL_THROW(InvalidArgument, "{}{}", errors.front().to_string(),
             more ? fmt::format(" (and {} more problem{})", more, more > 1 ? "s" : "") : "");
  }
  return job;
}

json job_to_json(const JobSpec& job) {
  return write_job<json>(job);
}

json read_job_json(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    SL_THROW(IoError, "cannot read job file {}: is a directory", path);
  std::ifstream in(path, std::ios::binary);
  if (!in) SL_THROW(IoError, "cannot open job file {}: {}", path, std::strerror(errno));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) SL_THROW(IoError, "cannot read job file {}", path);
  return parse_job_json(text, path);
}

json parse_job_json(const std::string& text, const std::string& source) {
  // nlohmann keeps the last of repeated keys; in a job file a repeat is a mistake, so the parser
  // callback tracks the keys seen in each open object.
  struct Frame {
    bool is_object;
    std::set<std::string> keys;
    std::string key;
  };
  std::vector<Frame> frames;
  std::string duplicate;
  const json::parser_callback_t on_event = [&](int, json::parse_event_t event, json& parsed) {
    using E = json::parse_event_t;
    if (event == E::object_start || event == E::array_start) {
      frames.push_back({event == E::object_start, {}, {}});
    } else if (event == E::object_end || event == E::array_end) {
      if (!frames.empty()) frames.pop_back();
    } else if (event == E::key && !frames.empty()) {
      Frame& f = frames.back();
      f.key = parsed.get<std::string>();
      if (!f.keys.insert(f.key).second && duplicate.empty()) {
        for (const Frame& open : frames)
          duplicate = open.is_object ? join_path(duplicate, open.key) : duplicate + "[]";
      }
    }
    return true;
  };

  json doc;
  try {
    doc = json::parse(text, on_event);
  } catch (const json::parse_error& e) {
    const auto [line, col] = line_col(text, e.byte);
    // what() is "[json.exception.parse_error.101] parse error at line L, column C: <detail>".
    std::string detail = e.what();
    const size_t at = detail.find(": ", detail.find("parse error"));
    if (at != std::string::npos) detail = detail.substr(at + 2);
    SL_THROW(FormatError, "{}:{}:{}: invalid JSON: {}", source, line, col, detail);
  }
  if (!duplicate.empty())
    SL_THROW(FormatError, "{}: {}: key appears more than once", source, duplicate);
  return doc;
}

JobSpec load_job(const std::string& path, const std::vector<std::string>& overrides) {
  json doc = read_job_json(path);
  for (const auto& o : overrides) apply_override(doc, o);
  return job_from_json(doc);
}

void save_job(const JobSpec& job, const std::string& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) SL_THROW(IoError, "cannot write job file {}: {}", path, std::strerror(errno));
  out << write_job<nlohmann::ordered_json>(job).dump(2) << '\n';
  out.flush();
  if (!out) SL_THROW(IoError, "cannot write job file {}", path);
}

}  // namespace shardlab
