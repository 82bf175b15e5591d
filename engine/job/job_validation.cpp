// validate(): the value rules of a job (ranges, choices, cross-field rules, fields not used by the
// chosen kinds). Types and unknown keys are checked while reading, in job_schema.cpp.
#include "engine/job/job_spec.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/display_text.h"
#include "engine/core/error.h"
#include "engine/job/job_fields.h"
#include "engine/job/job_schema.h"
#include "engine/optim/registry.h"
#include "engine/optim/validate.h"
#include "engine/topology/topology.h"

namespace shardlab {

using job_detail::write_job;
using nlohmann::json;

namespace {

// Whether this build can run ranks as MPI processes (engine/job/CMakeLists.txt defines it).
#ifdef SHARDLAB_HAVE_MPI
constexpr bool kHaveMpi = true;
#else
constexpr bool kHaveMpi = false;
#endif

constexpr int64_t kMaxAccumulationSteps = 1024;
constexpr double kMaxBucketMb = 4096;
constexpr double kMaxTimeoutSeconds = 86400;  // one day

// Model sizes: limits that no real job on these machines comes near, so that validation refuses an
// absurd size with one line naming the field before anything allocates, and every product of the
// layout math below fits in int64 (its factors are bounded first; sums and the few products that
// could still overflow saturate at INT64_MAX):
//  - each dimension at most 2^24 = 16,777,216: an MLP width, input_dim and num_classes; the GPT
//    vocabulary, context, width and MLP width (mlp_ratio x width). (GPT-3's widest is 49,152.)
//  - at most 4096 layers: model.mlp.hidden entries, model.gpt.layers. (GPT-3 has 96.)
//  - at most 2^31 parameters in all: 8 GiB of float32 parameters, 32 GiB with gradients and Adam's
//    two moments, which this engine may hold whole on every rank (ddp): a quarter of the largest
//    machine here (128 GiB of memory; an H200 has 139 GiB).
//  - at most 2^40 bytes (1 TiB) of activations for one batch, all ranks together and counted
//    generously (every layer's outputs, the attention scores and probabilities, the logits):
//    8 times the memory of the largest machine here.
constexpr int64_t kMaxModelDim = int64_t{1} << 24;
constexpr int64_t kMaxModelLayers = 4096;
constexpr int64_t kMaxModelParams = int64_t{1} << 31;
constexpr double kMaxActivationBytes = double(int64_t{1} << 40);
// model.gpt.vocab_size 0 is taken from the corpus: bytes, at most 256 symbols.
constexpr int64_t kCorpusVocab = 256;

// a + b and a x b of non-negative values, INT64_MAX when the result would not fit.
int64_t sat_add(int64_t a, int64_t b) {
  int64_t r = 0;
  return __builtin_add_overflow(a, b, &r) ? std::numeric_limits<int64_t>::max() : r;
}
int64_t sat_mul(int64_t a, int64_t b) {
  int64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? std::numeric_limits<int64_t>::max() : r;
}

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
    fail(field,
         fmt::format("must be one of {}, got \"{}\"", quoted_list(choices), display_text(value)));
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
  // Reports an InvalidArgument whose message reads "<field>: <problem>" (as the optimizer and
  // topology modules write them) under that field, or under `fallback` when it names none.
  void fail_from(const InvalidArgument& e, const std::string& fallback) {
    const std::string what = e.what();
    const size_t colon = what.find(": ");
    const std::string field = colon == std::string::npos ? "" : what.substr(0, colon);
    const bool names_field = !field.empty() && field.find(' ') == std::string::npos &&
                             field.find('.') != std::string::npos;
    if (names_field)
      fail(field, what.substr(colon + 2));
    else
      fail(fallback, what);
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

// A dimension above kMaxModelDim is reported under its field; false then (and for one below 1,
// which check_model reports).
bool dimension_ok(Checker& c, const std::string& field, int64_t value) {
  if (value > kMaxModelDim)
    c.fail(field, fmt::format("must be at most {} (2^24), got {}", kMaxModelDim, value));
  return value >= 1 && value <= kMaxModelDim;
}

bool layers_ok(Checker& c, const std::string& field, int64_t layers) {
  if (layers > kMaxModelLayers)
    c.fail(field, fmt::format("must be at most {}, got {}", kMaxModelLayers, layers));
  return layers >= 1 && layers <= kMaxModelLayers;
}

// The model's parameter count (under `params_field`, the dimension that contributes most) and the
// activations of one batch (`sample_floats` per sample; under `sample_field` when one sample alone
// is too much, else under train.batch_size).
void check_model_totals(Checker& c, int64_t params, const std::string& params_field,
                        double sample_floats, const std::string& sample_field, int64_t batch_size) {
  if (params > kMaxModelParams) {
    c.fail(params_field,
           fmt::format("the model would have {} parameters, more than {} (2^31), the most this "
                       "engine holds",
                       params, kMaxModelParams));
    return;
  }
  if (batch_size < 1) return;  // check_train reports it
  const double sample_bytes = sample_floats * sizeof(float);
  const double bytes = sample_bytes * static_cast<double>(batch_size);
  if (bytes <= kMaxActivationBytes) return;
  c.fail(sample_bytes > kMaxActivationBytes ? sample_field : "train.batch_size",
         fmt::format("a batch of {} would hold {:.0f} GiB of activations, more than {:.0f} GiB "
                     "(2^40 bytes)",
                     batch_size, bytes / double(1 << 30), kMaxActivationBytes / double(1 << 30)));
}

// Layer by layer: input_dim -> hidden[0] -> ... -> num_classes, each Linear with a bias.
void check_mlp_size(Checker& c, const MlpConfig& m, int64_t batch_size) {
  if (m.hidden.size() > static_cast<size_t>(kMaxModelLayers)) {
    c.fail("model.mlp.hidden",
           fmt::format("must hold at most {} layers, got {}", kMaxModelLayers, m.hidden.size()));
    return;
  }
  std::vector<std::pair<std::string, int64_t>> dims = {{"model.mlp.input_dim", m.input_dim}};
  for (size_t i = 0; i < m.hidden.size(); ++i)
    dims.emplace_back(fmt::format("model.mlp.hidden[{}]", i), m.hidden[i]);
  dims.emplace_back("model.mlp.num_classes", m.num_classes);
  bool ok = true;
  for (const auto& [field, value] : dims) ok = dimension_ok(c, field, value) && ok;
  if (!ok) return;

  int64_t params = 0, largest = -1;
  std::string params_field, widest_field = dims.front().first;
  int64_t widest = dims.front().second;
  // Per sample: the input and each layer's output before and after its activation (the logits and
  // their softmax for the last).
  double sample_floats = static_cast<double>(dims.front().second);
  for (size_t l = 0; l + 1 < dims.size(); ++l) {
    const auto& [in_field, in] = dims[l];
    const auto& [out_field, out] = dims[l + 1];
    const int64_t layer = in * out + out;  // <= 2^48 + 2^24
    params = sat_add(params, layer);
    if (layer > largest) largest = layer, params_field = in > out ? in_field : out_field;
    if (out > widest) widest = out, widest_field = out_field;
    sample_floats += 2.0 * static_cast<double>(out);
  }
  check_model_totals(c, params, params_field, sample_floats, widest_field, batch_size);
}

// Token and position embeddings, `layers` pre-LayerNorm transformer blocks (attention qkv and
// projection, an MLP of mlp_ratio x width), a final LayerNorm and the head (engine/model/gpt.cpp).
void check_gpt_size(Checker& c, const GptConfig& g, int64_t batch_size) {
  bool ok = g.vocab_size >= 0 && g.heads >= 1;  // below that check_model reports them
  if (g.vocab_size > kMaxModelDim) {
    c.fail("model.gpt.vocab_size",
           fmt::format("must be at most {} (2^24), got {}", kMaxModelDim, g.vocab_size));
    ok = false;
  }
  ok = dimension_ok(c, "model.gpt.context", g.context) && ok;
  const bool width_ok = dimension_ok(c, "model.gpt.width", g.width);
  ok = layers_ok(c, "model.gpt.layers", g.layers) && width_ok && ok;
  if (width_ok && g.mlp_ratio > kMaxModelDim / g.width) {
    c.fail("model.gpt.mlp_ratio",
           fmt::format("mlp_ratio x model.gpt.width = {} x {} must be at most {} (2^24)",
                       g.mlp_ratio, g.width, kMaxModelDim));
    ok = false;
  }
  if (!ok || g.mlp_ratio < 1) return;

  // Every factor is <= 2^24 and mlp_ratio x width <= 2^24, so each term fits before the layers
  // multiply it.
  const int64_t v = g.vocab_size > 0 ? g.vocab_size : kCorpusVocab, t = g.context, w = g.width;
  const int64_t r = g.mlp_ratio, layers = g.layers;
  const int64_t embed = 2 * v * w;  // token embedding and head
  const int64_t positions = t * w;
  const int64_t block = 4 * w * w + 2 * (r * w) * w + (9 + r) * w;
  const int64_t blocks = sat_mul(layers, block);
  const int64_t params = sat_add(sat_add(embed, positions), sat_add(blocks, 4 * w));
  std::string params_field = "model.gpt.width";
  if (embed >= positions && embed >= blocks && g.vocab_size > w)
    params_field = "model.gpt.vocab_size";
  else if (positions > embed && positions >= blocks && t > w)
    params_field = "model.gpt.context";
  else if (blocks > embed && blocks > positions && layers > w && layers > r)
    params_field = "model.gpt.layers";
  else if (blocks > embed && blocks > positions && r > w)
    params_field = "model.gpt.mlp_ratio";

  // Per sample: the embeddings and final LayerNorm, the logits and their softmax, and per block
  // its layer outputs (LayerNorms, qkv, attention, projections, MLP, residuals) and the
  // attention scores and probabilities of every head.
  const double td = double(t), wd = double(w), vd = double(v);
  const double per_block_width = td * wd * double(10 + 2 * r);
  const double per_block_scores = 2.0 * double(g.heads) * td * td;
  const double sample_floats =
      2 * td * wd + 2 * td * vd + double(layers) * (per_block_width + per_block_scores);
  std::string sample_field = "model.gpt.width";
  if (per_block_scores >= per_block_width && per_block_scores * double(layers) >= td * vd)
    sample_field = "model.gpt.context";
  else if (td * vd > double(layers) * per_block_width)
    sample_field = g.vocab_size > 0 ? "model.gpt.vocab_size" : "model.gpt.context";
  check_model_totals(c, params, params_field, sample_floats, sample_field, batch_size);
}

void check_model(Checker& c, const JobSpec& job) {
  const ModelConfig& m = job.model;
  if (!c.one_of("model.kind", m.kind, field_choices("model.kind"))) return;
  if (m.kind == "mlp") {
    c.at_least<int64_t>("model.mlp.input_dim", m.mlp.input_dim, 1);
    for (size_t i = 0; i < m.mlp.hidden.size(); ++i)
      c.at_least<int64_t>(fmt::format("model.mlp.hidden[{}]", i), m.mlp.hidden[i], 1);
    c.at_least<int64_t>("model.mlp.num_classes", m.mlp.num_classes, 2);
    c.one_of("model.mlp.activation", m.mlp.activation, field_choices("model.mlp.activation"));
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
    check_mlp_size(c, m.mlp, job.train.batch_size);
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
    check_gpt_size(c, g, job.train.batch_size);
  }
}

void check_data(Checker& c, const JobSpec& job) {
  const DataConfig& d = job.data;
  if (c.one_of("data.dataset", d.dataset, field_choices("data.dataset"))) {
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
    // Its messages read "optimizer.<field>: <problem>"; it stops at the first problem. They quote
    // the job's optimizer.name as it is.
    const std::string what = display_text(e.what(), std::string_view::npos);
    const size_t colon = what.find(": ");
    if (what.rfind("optimizer.", 0) == 0 && colon != std::string::npos)
      c.fail(what.substr(0, colon), what.substr(colon + 2));
    else
      c.fail("optimizer", what);
    return;
  }
  // The fields validate_optimizer_config() cannot call unused (their defaults are not zero), by
  // name: the order these reports always had.
  std::vector<std::string> keys;
  for (const HyperParameter& h : hyper_parameters())
    if (!h.zero_default) keys.emplace_back(h.name);
  std::sort(keys.begin(), keys.end());
  const OptimizerSpec& spec = optimizer_spec(o);
  for (const auto& key : keys)
    if (!spec.reads(key)) c.unused_field("optimizer." + key, "not used by " + o.name);
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
  if (!(t.accumulation_steps >= 1 && t.accumulation_steps <= kMaxAccumulationSteps))
    c.fail("train.accumulation_steps",
           fmt::format("must be in [1, {}], got {}", kMaxAccumulationSteps, t.accumulation_steps));
  if (!(std::isfinite(t.clip_grad_norm) && t.clip_grad_norm >= 0))
    c.fail("train.clip_grad_norm",
           fmt::format("must be a finite number >= 0 (0: no clipping), got {}", t.clip_grad_norm));

  const ScheduleConfig& s = t.schedule;
  if (c.one_of("train.schedule.kind", s.kind, field_choices("train.schedule.kind"))) {
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

// The 3D layout (pp x tp x dp) and what tensor and pipeline parallelism ask of the rest of the job.
void check_model_parallel(Checker& c, const JobSpec& job, bool world_ok) {
  const ParallelConfig& p = job.parallel;
  const TrainConfig& t = job.train;
  const bool model_parallel = uses_model_parallelism(p);
  // The field a model-parallel rule is reported under: the dimension that asks for it.
  const std::string dim_field = p.tp > 1 ? "parallel.tp" : "parallel.pp";

  c.at_least<int64_t>("parallel.pp", p.pp, 1);
  c.at_least<int64_t>("parallel.tp", p.tp, 1);
  const bool dp_ok = p.dp == -1 || p.dp >= 1;
  if (!dp_ok)
    c.fail("parallel.dp", fmt::format("must be >= 1 or -1 (world_size / (pp x tp)), got {}", p.dp));

  const bool micro_ok = p.micro_batches >= 1;
  c.at_least<int64_t>("parallel.micro_batches", p.micro_batches, 1);
  if (micro_ok && !model_parallel)
    c.unused_field("parallel.micro_batches",
                   "not used without tensor or pipeline parallelism (parallel.pp and parallel.tp "
                   "are 1; use train.accumulation_steps)");
  const std::string no_pipeline = "not used without pipeline parallelism (parallel.pp is 1)";
  if (c.one_of("parallel.schedule", p.schedule, field_choices("parallel.schedule")) && p.pp == 1)
    c.unused_field("parallel.schedule", no_pipeline);
  // Interleaved 1F1B: pp_chunks model chunks a stage, micro-batches in groups of pp (Megatron
  // requires both; pipeline_schedule.h). With pp 1 the schedule itself is reported unused.
  if (p.schedule != "interleaved") {
    c.unused_field("parallel.pp_chunks", "not used without schedule interleaved (leave it 1)");
  } else if (p.pp > 1) {
    if (p.pp_chunks < 2 || p.pp_chunks > kMaxPipelineChunks)
      c.fail("parallel.pp_chunks",
             fmt::format("must be in [2, {}] with schedule interleaved (the model chunks each "
                         "stage runs), got {}",
                         kMaxPipelineChunks, p.pp_chunks));
    if (micro_ok && p.micro_batches % p.pp != 0)
      c.fail("parallel.micro_batches",
             fmt::format("must be a multiple of parallel.pp = {} with schedule interleaved (its "
                         "micro-batches go through the chunks in groups of pp), got {}",
                         p.pp, p.micro_batches));
  }
  if (c.one_of("parallel.pp_partition", p.pp_partition, field_choices("parallel.pp_partition")) &&
      p.pp == 1)
    c.unused_field("parallel.pp_partition", no_pipeline);

  // The layout must resolve for world_size ranks (for a plain data-parallel job too: an explicit
  // dp must then equal world_size).
  std::optional<Topology> topo;
  if (world_ok && p.pp >= 1 && p.tp >= 1 && dp_ok) {
    try {
      topo = Topology::make({.pp = p.pp, .tp = p.tp, .dp = p.dp}, static_cast<int>(p.world_size));
    } catch (const InvalidArgument& e) {
      c.fail_from(e, "parallel");
    }
  }
  if (!model_parallel) return;

  const std::string what =
      p.tp > 1 ? (p.pp > 1 ? "tensor and pipeline parallelism" : "tensor parallelism")
               : "pipeline parallelism";
  const bool gpt = job.model.kind == "gpt";
  if (!gpt)
    c.fail(dim_field, fmt::format("{} need{} model.kind gpt, got {}", what,
                                  p.tp > 1 && p.pp > 1 ? "" : "s", display_text(job.model.kind)));
  if (contains(field_choices("parallel.strategy"), p.strategy) &&
      !contains(data_parallel_strategies(), p.strategy))
    c.fail("parallel.strategy",
           fmt::format("must be \"ddp\", \"zero1\" or \"zero2\" with {}, got \"{}\" (with "
                       "parallel.pp or parallel.tp > 1 the strategy is the data-parallel "
                       "dimension's: how each parallel.dp group shares gradients and optimizer "
                       "state)",
                       what, p.strategy));
  if (t.accumulation_steps > 1 && t.accumulation_steps <= kMaxAccumulationSteps)
    c.fail("train.accumulation_steps",
           fmt::format("must be 1 with {} (use parallel.micro_batches), got {}", what,
                       t.accumulation_steps));

  const GptConfig& g = job.model.gpt;
  if (topo && gpt && micro_ok && g.layers >= 1 && g.layers <= kMaxModelLayers && g.heads >= 1 &&
      g.width >= 1 && t.batch_size >= 1) {
    // Blocks are the pipeline's unit: the embedding, each transformer layer, the head.
    try {
      check_model_fits(*topo, g.layers + 2, g.heads, g.width, p.micro_batches, t.batch_size);
    } catch (const InvalidArgument& e) {
      c.fail_from(e, dim_field);
    }
    if (p.pp_chunks > 1 && p.pp_chunks <= kMaxPipelineChunks && g.layers + 2 < p.pp * p.pp_chunks)
      c.fail(
          "parallel.pp_chunks",
          fmt::format("{} stages of {} chunks are {} virtual stages, but the model has {} blocks "
                      "(model.gpt.layers + 2)",
                      p.pp, p.pp_chunks, p.pp * p.pp_chunks, g.layers + 2));
  }
}

// "HOST:PORT" (or "[v6]:PORT") with a port in [1, 65535]; the collector may not be up yet, so
// nothing is resolved here.
void check_teaching(Checker& c, const JobSpec& job) {
  const TelemetryConfig& t = job.telemetry;
  if (!(t.teaching_timeout_s > 0 && t.teaching_timeout_s <= 86400))
    c.fail("telemetry.teaching_timeout_s",
           fmt::format("must be in (0, 86400] seconds, got {}", t.teaching_timeout_s));
  if (!t.teaching) return;
  if (job.parallel.strategy == "none")
    c.fail("telemetry.teaching",
           "teaching mode holds the ranks of a sharded job; parallel.strategy is none");
  else if (job.parallel.backend != "threads")
    c.fail("telemetry.teaching",
           fmt::format("teaching mode holds ranks that are threads of one process; "
                       "parallel.backend is {} (use threads)",
                       display_text(job.parallel.backend)));
  if (job.device != "cpu")
    c.fail("telemetry.teaching",
           fmt::format("teaching mode runs on the CPU; device is {}", display_text(job.device)));
}

void check_telemetry(Checker& c, const TelemetryConfig& t) {
  if (t.address.empty()) {
    if (!t.token_file.empty()) c.fail("telemetry.token_file", "only used with telemetry.address");
    return;
  }
  const size_t colon = t.address.rfind(':');
  bool ok = colon != std::string::npos && colon > 0 && colon + 1 < t.address.size() &&
            colon + 6 >= t.address.size();
  long port = 0;
  if (ok) {
    for (size_t i = colon + 1; i < t.address.size(); ++i) {
      const char ch = t.address[i];
      if (ch < '0' || ch > '9') ok = false;
      port = port * 10 + (ch - '0');
    }
  }
  if (!ok || port < 1 || port > 65535)
    c.fail("telemetry.address",
           fmt::format("expected HOST:PORT with a port in [1, 65535], got '{}'",
                       display_text(t.address)));
}

void check_parallel(Checker& c, const JobSpec& job) {
  const ParallelConfig& p = job.parallel;
  const bool known_strategy =
      c.one_of("parallel.strategy", p.strategy, field_choices("parallel.strategy"));
  const bool single = p.strategy == "none";
  const bool world_ok = p.world_size >= 1 && p.world_size <= kMaxWorldSize;
  if (!world_ok) {
    c.fail("parallel.world_size",
           fmt::format("must be in [1, {}], got {}", kMaxWorldSize, p.world_size));
  } else if (single && p.world_size > 1) {
    std::vector<std::string> parallel_strategies;
    for (const auto& s : field_choices("parallel.strategy"))
      if (s != "none") parallel_strategies.push_back(s);
    std::string choices;
    for (size_t i = 0; i < parallel_strategies.size(); ++i)
      choices += (i == 0                                ? ""
                  : i + 1 == parallel_strategies.size() ? " or "
                                                        : ", ") +
                 parallel_strategies[i];
    c.fail("parallel.world_size",
           fmt::format("{} ranks need a strategy ({}); strategy \"none\" runs one process",
                       p.world_size, choices));
  }

  if (c.one_of("parallel.backend", p.backend, field_choices("parallel.backend"))) {
    if (single)
      c.unused_field("parallel.backend", "not used by strategy none");
    else if (p.backend == "mpi" && !kHaveMpi)
      c.fail("parallel.backend",
             "mpi is not available: this build has no MPI (install libopenmpi-dev and rebuild)");
  }

  if (known_strategy) {
    const std::string unused = "not used by strategy " + p.strategy;
    if (single || p.strategy == "fsdp")
      c.unused_field("parallel.bucket_mb", unused + (single ? "" : " (it communicates per block)"));
    else if (!(p.bucket_mb > 0 && p.bucket_mb <= kMaxBucketMb))
      c.fail("parallel.bucket_mb",
             fmt::format("must be in (0, {}] MiB, got {}", kMaxBucketMb, p.bucket_mb));
    if (single) c.unused_field("parallel.overlap", unused);
    if (p.strategy != "fsdp") c.unused_field("parallel.fsdp_keep_params", unused);
    if (single)
      c.unused_field("parallel.timeout_s", unused);
    else if (!(p.timeout_s > 0 && p.timeout_s <= kMaxTimeoutSeconds))
      c.fail("parallel.timeout_s",
             fmt::format("must be in (0, {}] seconds, got {}", kMaxTimeoutSeconds, p.timeout_s));
  }

  check_model_parallel(c, job, world_ok);

  // Every rank gets batch_size / world_size samples, cut into accumulation_steps micro-batches.
  // (A tensor or pipeline job splits its batch over parallel.dp replicas and micro_batches
  // instead; check_model_parallel checks that.)
  const TrainConfig& t = job.train;
  if (world_ok && !uses_model_parallelism(p) && t.batch_size >= 1 && t.accumulation_steps >= 1 &&
      t.accumulation_steps <= kMaxAccumulationSteps) {
    const int64_t parts = p.world_size * t.accumulation_steps;
    if (t.batch_size % parts != 0)
      c.fail("train.batch_size",
             fmt::format("must be divisible by parallel.world_size x train.accumulation_steps "
                         "= {}, got {}",
                         parts, t.batch_size));
  }
}

// Checkpoints are the ranks' sharded training state, so they need a sharded strategy.
void check_checkpoints(Checker& c, const JobSpec& job) {
  const TrainConfig& t = job.train;
  c.at_least<int64_t>("train.checkpoint_every", t.checkpoint_every, 0);
  c.at_least<int64_t>("train.keep_checkpoints", t.keep_checkpoints, 1);
  if (!(t.threads >= 0 && t.threads <= kMaxThreads))
    c.fail("train.threads",
           fmt::format("must be in [0, {}] (0: the cores divided among the ranks), got {}",
                       kMaxThreads, t.threads));
  if (t.checkpoint_dir.empty()) {
    const std::string why = "only used with train.checkpoint_dir";
    if (t.checkpoint_every >= 0) c.unused_field("train.checkpoint_every", why);
    if (t.keep_checkpoints >= 1) c.unused_field("train.keep_checkpoints", why);
  } else if (job.parallel.strategy == "none") {
    c.fail("train.checkpoint_dir",
           "checkpoints hold the ranks' sharded state: they need parallel.strategy ddp, zero1, "
           "zero2 or fsdp (strategy none does not save them)");
  }
}

}  // namespace

std::vector<FieldError> validate(const JobSpec& job) {
  Checker c(job);
  if (job.name.empty()) c.fail("name", "must not be empty");
  c.one_of("device", job.device, field_choices("device"));
  check_model(c, job);
  check_data(c, job);
  check_optimizer(c, job.optimizer);
  check_train(c, job.train);
  check_parallel(c, job);
  check_checkpoints(c, job);
  check_telemetry(c, job.telemetry);
  check_teaching(c, job);
  return c.take();
}

}  // namespace shardlab
