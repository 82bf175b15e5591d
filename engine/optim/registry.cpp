// The optimizer registry's entries, hyper-parameter validation and the one Optimizer
// implementation they share (state arrays from the entry, the update through its kernel).
#include "engine/optim/registry.h"

#include <algorithm>
#include <cmath>

#include "engine/core/error.h"
#include "engine/core/memory.h"
#include "engine/device/device_buffer.h"
#include "engine/optim/validate.h"

namespace shardlab {

namespace {

// An optimizer whose state and update its registry entry describes.
class RegisteredOptimizer : public Optimizer {
 public:
  explicit RegisteredOptimizer(OptimizerConfig config)
      : Optimizer(std::move(config)), spec_(optimizer_spec(config_)) {
    validate_optimizer_config(config_);
  }

  std::vector<std::pair<std::string, std::span<float>>> state() override {
    std::vector<std::pair<std::string, std::span<float>>> out;
    for (auto& [name, buffer] : state_)
      out.emplace_back(name, std::span<float>(host_address(device(), buffer.data()),
                                              static_cast<size_t>(buffer.size())));
    return out;
  }
  std::vector<std::pair<std::string, DeviceSpan<float>>> device_state() override {
    std::vector<std::pair<std::string, DeviceSpan<float>>> out;
    for (auto& [name, buffer] : state_) out.emplace_back(name, buffer.span());
    return out;
  }
  std::vector<std::string> state_names() override {
    std::vector<std::string> names;
    for (const auto& [name, buffer] : state_) names.push_back(name);
    return names;
  }

 protected:
  void allocate_state(int64_t n) override {
    state_.clear();
    for (const StateArray& a : state_arrays(config_)) {
      // Zeroed (or the initial value): SGD's first buf = momentum * 0 + g is PyTorch's buf = g.
      DeviceBuffer<float> b(device(), MemCategory::optimizer_state, n * a.per_param);
      if (a.initial != 0.0) device().fill(b.data(), b.size(), static_cast<float>(a.initial));
      state_.emplace_back(a.name, std::move(b));
    }
  }

  void update_on_device(DeviceSpan<float> params, DeviceSpan<const float> grads,
                        double lr) override {
    // Device addresses in the kernels' Args (the device's kernel table takes them so).
    std::vector<float*> pointers;
    size_t kept = 0;
    for (const StateArraySpec& s : spec_.state) {
      const bool present = !s.present || s.present(config_);
      pointers.push_back(present ? state_[kept++].second.data().raw() : nullptr);
    }
    run_update(device(), spec_.args(config_, {.param = params.data().raw(),
                                              .grad = grads.data().raw(),
                                              .n = static_cast<int64_t>(params.size()),
                                              .lr = lr,
                                              .step = steps(),
                                              .state = pointers}));
  }

 private:
  const OptimizerSpec& spec_;
  std::vector<std::pair<std::string, DeviceBuffer<float>>> state_;
};

std::unique_ptr<Optimizer> make_registered(const OptimizerConfig& config) {
  return std::make_unique<RegisteredOptimizer>(config);
}

bool with_momentum(const OptimizerConfig& c) {
  return c.momentum != 0.0;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// Each check names the field as the job file spells it.
void check(const HyperParameter& h, const OptimizerConfig& c) {
  const double v = h.get(c);
  if (h.rule == HyperRule::needs_momentum) {
    SL_ENFORCE(v == 0.0 || c.momentum > 0.0,
               "optimizer.{}: needs optimizer.momentum > 0, got momentum {}", h.name, c.momentum);
    return;
  }
  SL_ENFORCE(std::isfinite(v), "optimizer.{}: must be a finite number, got {}", h.name, v);
  switch (h.rule) {
    case HyperRule::positive:
      SL_ENFORCE(v > 0.0, "optimizer.{}: must be > 0, got {}", h.name, v);
      break;
    case HyperRule::non_negative:
      SL_ENFORCE(v >= 0.0, "optimizer.{}: must be >= 0, got {}", h.name, v);
      break;
    case HyperRule::unit:
      SL_ENFORCE(v >= 0.0 && v < 1.0, "optimizer.{}: must be in [0, 1), got {}", h.name, v);
      break;
    case HyperRule::needs_momentum:
      break;
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The entries. Semantics follow torch.optim: SGD with dampening 0 and optional (Nesterov)
// momentum; Adam (L2 decay on the gradient) and AdamW (decoupled decay) without amsgrad; RMSprop
// not centred; Adagrad with lr_decay 0 (a schedule belongs to the trainer's lr). Every one adds
// weight_decay as L2 to the gradient, AdamW excepted.

const std::vector<OptimizerSpec>& optimizer_registry() {
  static const std::vector<OptimizerSpec> registry = {
      {"sgd",
       {"lr", "weight_decay", "momentum", "nesterov"},
       {{"momentum_buffer", 1, with_momentum}},
       sgd_args,
       make_registered},
      {"adam",
       {"lr", "weight_decay", "beta1", "beta2", "eps"},
       {{"exp_avg"}, {"exp_avg_sq"}},
       adam_args,
       make_registered},
      {"adamw",
       {"lr", "weight_decay", "beta1", "beta2", "eps"},
       {{"exp_avg"}, {"exp_avg_sq"}},
       adam_args,
       make_registered},
      {"rmsprop",
       {"lr", "weight_decay", "momentum", "eps", "alpha"},
       {{"square_avg"}, {"momentum_buffer", 1, with_momentum}},
       rmsprop_args,
       make_registered},
      {"adagrad",
       {"lr", "weight_decay", "eps", "initial_accumulator"},
       {{"sum", 1, nullptr, [](const OptimizerConfig& c) { return c.initial_accumulator; }}},
       adagrad_args,
       make_registered},
  };
  return registry;
}

const std::vector<HyperParameter>& hyper_parameters() {
  using C = const OptimizerConfig&;
  using R = HyperRule;
  static const std::vector<HyperParameter> all = {
      {"lr", [](C c) { return c.lr; }, R::positive, false},
      {"weight_decay", [](C c) { return c.weight_decay; }, R::non_negative, true},
      {"momentum", [](C c) { return c.momentum; }, R::non_negative, true},
      {"nesterov", [](C c) { return c.nesterov ? 1.0 : 0.0; }, R::needs_momentum, true},
      {"beta1", [](C c) { return c.beta1; }, R::unit, false},
      {"beta2", [](C c) { return c.beta2; }, R::unit, false},
      {"eps", [](C c) { return c.eps; }, R::positive, false},
      {"alpha", [](C c) { return c.alpha; }, R::unit, false},
      {"initial_accumulator", [](C c) { return c.initial_accumulator; }, R::non_negative, true},
  };
  return all;
}

// ---------------------------------------------------------------------------------------------
// Look-ups.

bool OptimizerSpec::reads(std::string_view hyper_parameter) const {
  return std::find(hyper_parameters.begin(), hyper_parameters.end(), hyper_parameter) !=
         hyper_parameters.end();
}

const OptimizerSpec* find_optimizer(std::string_view name) {
  for (const OptimizerSpec& s : optimizer_registry())
    if (s.name == name) return &s;
  return nullptr;
}

const OptimizerSpec& optimizer_spec(const OptimizerConfig& config) {
  const OptimizerSpec* s = find_optimizer(config.name);
  SL_ENFORCE(s != nullptr, "optimizer.name: unknown optimizer '{}' (known: {})", config.name,
             join(optimizer_names()));
  return *s;
}

const std::vector<std::string>& optimizer_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const OptimizerSpec& s : optimizer_registry()) v.push_back(s.name);
    return v;
  }();
  return names;
}

std::vector<std::string> optimizers_reading(std::string_view hyper_parameter) {
  std::vector<std::string> v;
  for (const OptimizerSpec& s : optimizer_registry())
    if (s.reads(hyper_parameter)) v.push_back(s.name);
  return v;
}

std::vector<StateArray> state_arrays(const OptimizerConfig& config) {
  std::vector<StateArray> v;
  for (const StateArraySpec& s : optimizer_spec(config).state)
    if (!s.present || s.present(config))
      v.push_back({s.name, s.per_param, s.initial ? s.initial(config) : 0.0});
  return v;
}

int64_t state_floats_per_param(const OptimizerConfig& config) {
  int64_t floats = 0;
  for (const StateArray& a : state_arrays(config)) floats += a.per_param;
  return floats;
}

// ---------------------------------------------------------------------------------------------
// Validation and the factory.

void validate_optimizer_config(const OptimizerConfig& c) {
  const OptimizerSpec& spec = optimizer_spec(c);
  // In OptimizerConfig's order, so the first problem reported is the first field's.
  for (const HyperParameter& h : hyper_parameters()) {
    if (spec.reads(h.name))
      check(h, c);
    else if (h.zero_default)
      SL_ENFORCE(h.get(c) == 0.0, "optimizer.{}: not used by {} (only by {}), got {}", h.name,
                 c.name, join(optimizers_reading(h.name)), h.get(c));
  }
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config) {
  validate_optimizer_config(config);
  return optimizer_spec(config).make(config);
}

}  // namespace shardlab
