#include "engine/doctor/model_checks.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "engine/core/device.h"
#include "engine/data/batch.h"
#include "engine/device/device.h"
#include "engine/model/cross_entropy.h"
#include "engine/model/model.h"

namespace shardlab::doctor {

ModelConfig check_mlp_config(const std::string& activation) {
  ModelConfig c;
  c.kind = "mlp";
  c.mlp.input_dim = 12;
  c.mlp.hidden = {16, 8};
  c.mlp.num_classes = 5;
  c.mlp.activation = activation;
  c.seed = 7;
  return c;
}

ModelConfig check_gpt_config() {
  ModelConfig c;
  c.kind = "gpt";
  c.gpt.vocab_size = 20;
  c.gpt.context = 16;
  c.gpt.width = 32;
  c.gpt.layers = 2;
  c.gpt.heads = 4;
  c.gpt.mlp_ratio = 4;
  c.seed = 11;
  return c;
}

Batch check_batch(const ModelConfig& config, uint32_t seed, int64_t steps) {
  std::mt19937 rng(seed);
  Batch b;
  if (config.kind == "mlp") {
    const int64_t rows = 6;
    std::normal_distribution<float> feature(0.0f, 1.0f);
    std::uniform_int_distribution<int32_t> cls(0, static_cast<int32_t>(config.mlp.num_classes) - 1);
    b.input.resize({rows, config.mlp.input_dim});
    for (int64_t i = 0; i < b.input.numel(); ++i) b.input[i] = feature(rng);
    for (int64_t r = 0; r < rows; ++r) b.targets.push_back(cls(rng));
    return b;
  }
  const int64_t batch = 3;
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(config.gpt.vocab_size) - 1);
  b.input.resize({batch, steps});
  for (int64_t i = 0; i < b.input.numel(); ++i) b.input[i] = static_cast<float>(id(rng));
  for (int64_t i = 0; i < batch * steps; ++i) b.targets.push_back(id(rng));
  return b;
}

// The model's step from zeroed gradients on its device: Model::forward, SoftmaxCrossEntropy forward
// and backward (dlogits scaled by `scale` on the device), Model::backward; the gradients read back.
CpuStep model_step(Model& model, const Batch& batch, float scale, bool zero) {
  CpuStep out;
  if (zero) model.zero_grad();
  const Tensor& logits = model.forward(batch.input);
  SoftmaxCrossEntropy xent;
  out.loss = xent.forward(logits, batch.targets);
  out.correct = count_correct(logits, batch.targets);
  Tensor dlogits;
  xent.backward(dlogits);
  if (scale != 1.0f) model.device().scale(dlogits.dev(), dlogits.numel(), scale);
  model.backward(dlogits);
  out.grads.resize(static_cast<size_t>(model.num_params()));
  model.device().copy_to_host(DeviceSpan<const float>(model.device_grads()),
                              std::span<float>(out.grads));
  return out;
}

CpuStep cpu_step(Model& model, const Batch& batch) {
  return model_step(model, batch, 1.0f, true);
}

namespace {

constexpr const char* kGroup = "model";

struct Case {
  std::string name;
  ModelConfig config;
  int64_t steps = 16;  // GPT sequence length
};

// max |got - want| / max |want| over [begin, begin + n); 0 when both are all zero, infinite when
// only `want` is (or the sizes differ).
double rel_err(const std::vector<float>& got, const std::vector<float>& want, int64_t begin = 0,
               int64_t n = -1) {
  if (got.size() != want.size()) return INFINITY;
  if (n < 0) n = static_cast<int64_t>(want.size());
  double diff = 0, scale = 0;
  for (int64_t i = begin; i < begin + n; ++i) {
    const auto k = static_cast<size_t>(i);
    diff = std::max(diff, std::fabs(static_cast<double>(got[k]) - want[k]));
    scale = std::max(scale, std::fabs(static_cast<double>(want[k])));
  }
  if (scale == 0) return diff == 0 ? 0 : INFINITY;
  return diff / scale;
}

std::vector<float> scaled(std::vector<float> v, float s) {
  for (float& x : v) x *= s;
  return v;
}

double differing(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double n = 0;
  for (size_t i = 0; i < a.size(); ++i) n += a[i] == b[i] ? 0 : 1;
  return n;
}

// The case's model on `device`, with the parameters of `cpu` (the same build, on the host).
std::unique_ptr<Model> on_device(const Case& c, const Model& cpu, Device& device) {
  auto m = build_model(c.config, ModelStorage::owned, 1, &device);
  device.copy_from_host(cpu.params(), m->device_params());
  return m;
}

std::vector<float> params_of(Model& m) {
  std::vector<float> h(static_cast<size_t>(m.num_params()));
  m.device().copy_to_host(DeviceSpan<const float>(m.device_params()), std::span<float>(h));
  return h;
}

void matches_cpu(CheckList& out, const Case& c, Device& device) {
  auto cpu = build_model(c.config);
  const Batch batch = check_batch(c.config, 123, c.steps);
  const CpuStep want = cpu_step(*cpu, batch);
  auto dev = on_device(c, *cpu, device);
  const CpuStep got = model_step(*dev, batch, 1.0f, true);
  const std::vector<float>& grads = got.grads;

  out.push_back(bounded(kGroup, c.name + " loss", "rel err",
                        std::fabs(static_cast<double>(got.loss) - want.loss) / std::fabs(want.loss),
                        1e-5, fmt::format("device {:.9g}, cpu {:.9g}", got.loss, want.loss)));
  out.push_back(bounded(kGroup, c.name + " correct", "abs diff",
                        std::fabs(static_cast<double>(got.correct - want.correct)), 0,
                        fmt::format("device {}, cpu {}", got.correct, want.correct)));
  out.push_back(bounded(kGroup, c.name + " gradients", "max rel err", rel_err(grads, want.grads),
                        1e-4, "max |device - cpu| / max |cpu| over every gradient"));
  double worst = 0;
  std::string worst_name;
  for (const ParamInfo& p : cpu->layout().params()) {
    const double e = rel_err(grads, want.grads, p.offset, p.numel);
    if (!(e <= worst)) {
      worst = e;
      worst_name = p.name;
    }
  }
  out.push_back(bounded(kGroup, c.name + " gradients per parameter", "worst rel err", worst, 1e-2,
                        "worst: " + worst_name));
  double key_bias = 0;
  for (const ParamInfo& p : cpu->layout().params()) {
    if (p.name.find("attn.qkv.bias") == std::string::npos) continue;
    const int64_t w = p.numel / 3;
    for (int64_t i = p.offset + w; i < p.offset + 2 * w; ++i)
      key_bias +=
          (grads[static_cast<size_t>(i)] != 0.0f || want.grads[static_cast<size_t>(i)] != 0.0f) ? 1
                                                                                                : 0;
  }
  if (c.config.kind == "gpt")
    out.push_back(bounded(kGroup, c.name + " qkv key bias gradient", "elements not zero", key_bias,
                          0, "the key bias cannot change the softmax: its gradient is 0"));
}

void accumulates_and_scales(CheckList& out, const Case& c, Device& device) {
  auto cpu = build_model(c.config);
  const Batch batch = check_batch(c.config, 321, c.steps);
  auto dev = on_device(c, *cpu, device);
  const std::vector<float> once = model_step(*dev, batch, 1.0f, true).grads;
  const std::vector<float> twice = model_step(*dev, batch, 1.0f, false).grads;
  out.push_back(bounded(kGroup, c.name + " accumulate", "max rel err",
                        rel_err(twice, scaled(once, 2.0f)), 1e-4,
                        "two steps' gradients added against twice one"));
  const std::vector<float> half = model_step(*dev, batch, 0.5f, true).grads;
  out.push_back(bounded(kGroup, c.name + " scale", "max rel err", rel_err(half, scaled(once, 0.5f)),
                        1e-6, "dlogits halved against half of one step's gradients"));
}

void round_trip(CheckList& out, const Case& c, Device& device) {
  auto cpu = build_model(c.config);
  auto dev = on_device(c, *cpu, device);
  const std::vector<float> initial(cpu->params().begin(), cpu->params().end());
  double d = differing(params_of(*dev), initial);
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> other(initial.size());
  for (float& v : other) v = normal(rng);
  device.copy_from_host(std::span<const float>(other), dev->device_params());
  d += differing(params_of(*dev), other);
  out.push_back(bounded(kGroup, c.name + " parameter round trip", "elements differing", d, 0,
                        "after construction and after a copy from the host"));
}

}  // namespace

CheckList device_model_checks(Device& device) {
  CheckList out;
  const std::vector<Case> cases = {{"mlp-relu", check_mlp_config("relu")},
                                   {"mlp-gelu", check_mlp_config("gelu")},
                                   {"gpt T=16", check_gpt_config(), 16},
                                   {"gpt T=11", check_gpt_config(), 11}};
  for (const Case& c : cases) {
    guarded(out, kGroup, c.name, [&](CheckList& o) { matches_cpu(o, c, device); });
    guarded(out, kGroup, c.name + " accumulate",
            [&](CheckList& o) { accumulates_and_scales(o, c, device); });
  }
  guarded(out, kGroup, "mlp-relu round trip",
          [&](CheckList& o) { round_trip(o, cases[0], device); });
  guarded(out, kGroup, "gpt round trip", [&](CheckList& o) { round_trip(o, cases[2], device); });
  return out;
}

CheckList gpu_model_checks(int device) {
  CheckList out;
  if (const std::string why = gpu_skip_reason(device); !why.empty()) {
    out.push_back(skipped(kGroup, "GPU model", why));
    return out;
  }
  std::unique_ptr<Device> gpu;
  DeviceOptions o;
  o.index = device;
  guarded(out, kGroup, fmt::format("CUDA device {}", device),
          [&](CheckList&) { gpu = make_device(DeviceKind::cuda, o); });
  if (!gpu) return out;
  CheckList checks = device_model_checks(*gpu);
  out.insert(out.end(), checks.begin(), checks.end());
  return out;
}

}  // namespace shardlab::doctor
