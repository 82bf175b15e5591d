// Device: one rank's compute device, as the engine's layers, models, optimizers and strategies use
// it: its memory, explicit and counted copies between it and the host, an ordered stream of work,
// and the table of kernels that kernels/cpu and kernels/cuda share.
//
// Three kinds, one interface (compare ggml's backend buffers, DeepSpeed's accelerator):
//   cpu   host memory; kernels/cpu run on the calling thread as they are queued.
//   test  memory the host cannot touch (engine/device/test_device.h) and a stream on its own
//         thread running kernels/cpu through a second mapping: a check of the device plumbing in
//         CI. A missed copy crashes at its line; a missed synchronisation gives a wrong result.
//         Its results equal cpu's bit for bit (the same kernels in the same order).
//   cuda  one GPU: kernels/cuda on the rank's stream and cuBLAS handle, memory from the stream-
//         ordered pool (cudaMallocAsync), so a free is ordered after the kernels that still read.
//
// Ordering. Kernels, device-to-device copies, fills and frees run in the order they are queued on
// the device's one stream. copy_to_host returns once the data is on the host (it waits for the
// work queued before it); copy_from_host returns once the host memory may be reused. synchronize()
// waits for everything queued. Every wait is bounded by the device's timeout (TimeoutError).
// A kernel's failure (out of memory, a failed launch) is a DeviceError, thrown by the call that
// queued it or by the next wait.
//
// Counting. Every host<->device copy adds to copies(): how many and how many bytes each way
// (a step that copies more than it should shows in its figures; tests pin them).
//
// Threads. A Device belongs to one rank and is used from one thread at a time (its rank's).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "engine/core/device_ptr.h"
#include "kernels/cpu/adagrad_update.h"
#include "kernels/cpu/adam_update.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/rmsprop_update.h"
#include "kernels/cpu/sgd_update.h"

namespace shardlab {

enum class DeviceKind { cpu, test, cuda };
// "cpu", "test", "cuda".
const char* to_string(DeviceKind kind);
// The kind named `name`; throws InvalidArgument listing the three names otherwise.
DeviceKind parse_device_kind(std::string_view name);
// The job field's choices, in order: "cpu", "cuda", "test".
const std::vector<std::string>& device_kind_names();

// Host<->device traffic since the device was made (or reset_copies()).
struct CopyCounts {
  int64_t to_host = 0, to_host_bytes = 0;
  int64_t from_host = 0, from_host_bytes = 0;
};

struct DeviceOptions {
  int index = 0;                // the GPU (cuda); ignored by cpu and test
  double timeout_s = 300.0;     // bound on every wait for the stream
  size_t test_arena_bytes = 0;  // test: address space reserved for its memory (0: 16 GiB)
};

class Device {
 public:
  virtual ~Device() = default;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  virtual DeviceKind kind() const = 0;
  // "cpu", "test device (host access blocked)", "NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)".
  virtual std::string describe() const = 0;

  // --- memory (DeviceBuffer, device_buffer.h, is the owner callers use) ---
  // `bytes` of zero-filled device memory, aligned to 256 bytes, ordered on the stream (kernels
  // queued after it see zeros). Throws DeviceError naming `what` when the device is out of memory.
  virtual void* allocate(size_t bytes, const char* what) = 0;
  // Frees memory from allocate(), after everything queued so far has run.
  virtual void deallocate(void* p, size_t bytes) noexcept = 0;

  // --- copies (counted) ---
  template <class T>
  void copy_to_host(DeviceSpan<const T> src, std::span<T> dst) {
    check_copy(src.size(), dst.size(), "copy_to_host");
    if (src.empty()) return;
    copy_to_host_bytes(src.data().raw(), dst.data(), src.size_bytes());
  }
  template <class T>
  void copy_from_host(std::span<const T> src, DeviceSpan<T> dst) {
    check_copy(src.size(), dst.size(), "copy_from_host");
    if (src.empty()) return;
    copy_from_host_bytes(src.data(), dst.data().raw(), src.size_bytes());
  }
  template <class T>
  void copy_to_host(DeviceSpan<T> src, std::span<T> dst) {
    copy_to_host(DeviceSpan<const T>(src), dst);
  }
  template <class T>
  void copy_from_host(std::span<T> src, DeviceSpan<T> dst) {
    copy_from_host(std::span<const T>(src), dst);
  }
  // Device to device, queued on the stream; the two must not overlap.
  template <class T>
  void copy(DeviceSpan<const T> src, DeviceSpan<T> dst) {
    check_copy(src.size(), dst.size(), "copy");
    if (src.empty()) return;
    copy_bytes(src.data().raw(), dst.data().raw(), src.size_bytes());
  }
  template <class T>
  void copy(DeviceSpan<T> src, DeviceSpan<T> dst) {
    copy(DeviceSpan<const T>(src), dst);
  }
  // One value to the host, through the same counted path (small control values: a norm, a flag).
  template <class T>
  std::remove_const_t<T> read(DevicePtr<T> p) {
    std::remove_const_t<T> v{};
    copy_to_host(DeviceSpan<const std::remove_const_t<T>>(p, 1), std::span(&v, 1));
    return v;
  }
  CopyCounts copies() const;
  void reset_copies();

  // The squared L2 norm of x (in double), computed on the device and read back through the
  // device's one staging slot: the path every small control value takes (a gradient norm, a flag).
  // Safe to call from several threads at once (the host device is shared by a process's rank
  // threads): the slot is held from the kernel's write to the read.
  double squared_norm(DeviceSpan<const float> x);

  // The native stream the device's work is queued on, for a communicator that moves the device's
  // memory itself and must order its work after the kernels that wrote it (cuda: its
  // cudaStream_t; null on cpu and test, whose collectives are staged or direct on the host).
  virtual void* native_stream() const { return nullptr; }

  // Waits for everything queued; TimeoutError naming `what` after the device's timeout,
  // DeviceError when queued work failed.
  virtual void synchronize(const char* what) = 0;

  // --- the kernel table: kernels/cpu's ops over device memory, queued on the stream ---
  virtual void fill(DevicePtr<float> x, int64_t n, float value) = 0;
  virtual void gemm(kernels::Trans ta, kernels::Trans tb, int64_t m, int64_t n, int64_t k,
                    float alpha, DevicePtr<const float> a, int64_t lda, DevicePtr<const float> b,
                    int64_t ldb, float beta, DevicePtr<float> c, int64_t ldc) = 0;
  virtual void relu_forward(DevicePtr<const float> x, DevicePtr<float> y, int64_t n) = 0;
  virtual void relu_backward(DevicePtr<const float> y, DevicePtr<const float> dy,
                             DevicePtr<float> dx, int64_t n) = 0;
  virtual void gelu_forward(DevicePtr<const float> x, DevicePtr<float> y, DevicePtr<float> tanh_out,
                            int64_t n) = 0;
  virtual void gelu_backward(DevicePtr<const float> x, DevicePtr<const float> tanh_in,
                             DevicePtr<const float> dy, DevicePtr<float> dx, int64_t n) = 0;
  virtual void add(DevicePtr<const float> a, DevicePtr<const float> b, DevicePtr<float> out,
                   int64_t n) = 0;
  virtual void scale(DevicePtr<float> x, int64_t n, float s) = 0;
  virtual void bias_add(DevicePtr<float> y, DevicePtr<const float> bias, int64_t rows,
                        int64_t cols) = 0;
  virtual void bias_grad(DevicePtr<const float> dy, DevicePtr<float> dbias, int64_t rows,
                         int64_t cols) = 0;
  virtual void layer_norm_forward(DevicePtr<const float> x, DevicePtr<const float> weight,
                                  DevicePtr<const float> bias, DevicePtr<float> y,
                                  DevicePtr<float> xhat, DevicePtr<float> rstd, int64_t rows,
                                  int64_t dim, float eps) = 0;
  virtual void layer_norm_backward(DevicePtr<const float> dy, DevicePtr<const float> xhat,
                                   DevicePtr<const float> rstd, DevicePtr<const float> weight,
                                   DevicePtr<float> dx, DevicePtr<float> dweight,
                                   DevicePtr<float> dbias, int64_t rows, int64_t dim) = 0;
  virtual void causal_attention_forward(const kernels::AttentionDims& dims,
                                        DevicePtr<const float> qkv, DevicePtr<float> probs,
                                        DevicePtr<float> att) = 0;
  virtual void causal_attention_backward(const kernels::AttentionDims& dims,
                                         DevicePtr<const float> qkv, DevicePtr<const float> probs,
                                         DevicePtr<const float> datt, DevicePtr<float> dqkv,
                                         DevicePtr<float> dscores) = 0;
  virtual void embedding_forward(DevicePtr<const int32_t> ids, DevicePtr<const float> table,
                                 DevicePtr<const float> pos, DevicePtr<float> y, int64_t n,
                                 int64_t steps, int64_t dim) = 0;
  // host_ids: the same n ids as the host holds them (a device that groups rows by id, as cuda
  // does to add each id's rows in order, sorts them there).
  virtual void embedding_backward(DevicePtr<const int32_t> ids, std::span<const int32_t> host_ids,
                                  DevicePtr<const float> dy, DevicePtr<float> dtable,
                                  DevicePtr<float> dpos, int64_t n, int64_t steps, int64_t dim,
                                  int64_t vocab) = 0;
  virtual void softmax_xent_forward(DevicePtr<const float> logits, DevicePtr<const int32_t> targets,
                                    DevicePtr<float> probs, DevicePtr<double> row_loss,
                                    DevicePtr<int32_t> row_correct, int64_t rows,
                                    int64_t classes) = 0;
  virtual void softmax_xent_backward(DevicePtr<const float> probs, DevicePtr<const int32_t> targets,
                                     DevicePtr<float> dlogits, int64_t rows, int64_t classes,
                                     float scale) = 0;
  // Tensor parallelism's kernels. The embedding of a table cut by vocabulary rows: this device
  // holds the global rows [begin, end) (kernels/cpu/range_embedding.h); host_ids as in
  // embedding_backward.
  virtual void range_embedding_forward(DevicePtr<const int32_t> ids, DevicePtr<const float> table,
                                       int64_t begin, int64_t end, DevicePtr<float> y, int64_t n,
                                       int64_t dim) = 0;
  virtual void range_embedding_backward(DevicePtr<const int32_t> ids,
                                        std::span<const int32_t> host_ids,
                                        DevicePtr<const float> dy, int64_t begin, int64_t end,
                                        DevicePtr<float> dtable, DevicePtr<float> dpos, int64_t n,
                                        int64_t steps, int64_t dim) = 0;
  // The rank-local steps of the vocabulary-parallel cross-entropy (kernels/cpu/vocab_xent.h).
  virtual void vocab_xent_row_max(DevicePtr<const float> logits, DevicePtr<float> row_max,
                                  int64_t rows, int64_t cols) = 0;
  virtual void vocab_xent_partials(DevicePtr<const float> logits, DevicePtr<const float> row_max,
                                   DevicePtr<const int32_t> targets, int64_t vocab_begin,
                                   DevicePtr<float> sum_exp, DevicePtr<float> target_logit,
                                   int64_t rows, int64_t cols) = 0;
  virtual void vocab_xent_probs(DevicePtr<const float> logits, DevicePtr<const float> row_max,
                                DevicePtr<const float> sum_exp, DevicePtr<const float> target_logit,
                                DevicePtr<float> probs, DevicePtr<double> row_loss, int64_t rows,
                                int64_t cols) = 0;
  virtual void vocab_xent_backward(DevicePtr<const float> probs, DevicePtr<const int32_t> targets,
                                   int64_t vocab_begin, DevicePtr<float> dlogits, int64_t rows,
                                   int64_t cols, float inv_rows) = 0;
  virtual void vocab_xent_argmax_neg_id(DevicePtr<const float> logits,
                                        DevicePtr<const float> row_max, int64_t vocab_begin,
                                        DevicePtr<float> neg_best, int64_t rows, int64_t cols) = 0;
  // *out = the sum of x[i]^2 in double (kernels/cpu/sq_norm.h's order on cpu and test).
  virtual void sq_norm(DevicePtr<const float> x, int64_t n, DevicePtr<double> out) = 0;
  virtual void scale_cast_to_bf16(DevicePtr<const float> in, DevicePtr<uint16_t> out, int64_t n,
                                  float scale) = 0;
  virtual void scale_cast_from_bf16(DevicePtr<const uint16_t> in, DevicePtr<float> out, int64_t n,
                                    float scale) = 0;
  // The fused optimizer updates; every pointer in the Args is an address in this device's memory
  // (engine/optim builds them from DeviceSpans).
  virtual void sgd_update(const kernels::SgdArgs& a) = 0;
  virtual void adam_update(const kernels::AdamArgs& a) = 0;
  virtual void rmsprop_update(const kernels::RmspropArgs& a) = 0;
  virtual void adagrad_update(const kernels::AdagradArgs& a) = 0;

 protected:
  Device() = default;
  // dst on the host, after the work queued before; counted.
  virtual void copy_to_host_bytes(const void* src, void* dst, size_t bytes) = 0;
  virtual void copy_from_host_bytes(const void* src, void* dst, size_t bytes) = 0;
  virtual void copy_bytes(const void* src, void* dst, size_t bytes) = 0;
  void count_to_host(size_t bytes);
  void count_from_host(size_t bytes);
  // A few bytes of device memory for control values (not charged to the ledger: the device's own,
  // as a GPU library's workspace is). Derived destructors give it back with release_staging().
  // Callers hold staging_mu_ from allocation until the value has been read.
  DevicePtr<double> staging();
  void release_staging() noexcept;

 private:
  static void check_copy(size_t from, size_t to, const char* what);
  // Atomic: the host device is shared by the threads of a process.
  std::atomic<int64_t> to_host_{0}, to_host_bytes_{0}, from_host_{0}, from_host_bytes_{0};
  std::mutex staging_mu_;
  void* staging_ = nullptr;
};

// The host address of memory on a host (cpu) device; InternalError on any other. Only for the code
// that has not moved onto the device yet (it then runs on cpu only).
[[noreturn]] void host_access_refused(const Device& device);
template <class T>
T* host_address(const Device& device, DevicePtr<T> p) {
  if (device.kind() != DeviceKind::cpu) host_access_refused(device);
  return p.raw();
}

// A device of `kind` for one rank. cuda needs a CUDA build and a usable GPU options.index
// (DeviceError naming why otherwise: engine/core/device.h's device_problem says it beforehand).
std::unique_ptr<Device> make_device(DeviceKind kind, const DeviceOptions& options = {});

// The process's host device (kind cpu): one per process, shared by its threads (stateless but for
// its copy counts and its staging slot, both safe to share). What a model, optimizer or strategy
// uses when it is given no device.
Device& host_device();

}  // namespace shardlab
