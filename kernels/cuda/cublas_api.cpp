#include "kernels/cuda/cublas_api.h"

#include <dlfcn.h>

#include <stdexcept>
#include <string>

namespace shardlab::kernels {

namespace {

#define SL_CUBLAS_STR2(x) #x
#define SL_CUBLAS_STR(x) SL_CUBLAS_STR2(x)
constexpr const char* kSoname = "libcublas.so." SL_CUBLAS_STR(CUBLAS_VER_MAJOR);

void* open_library(std::string& why) {
  if (void* h = dlopen(kSoname, RTLD_NOW | RTLD_LOCAL)) return h;
  why = dlerror();
#ifdef SHARDLAB_CUDA_LIBRARY_DIR
  const std::string path = std::string(SHARDLAB_CUDA_LIBRARY_DIR) + "/" + kSoname;
  if (void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
  why += "; " + std::string(dlerror());
#endif
  return nullptr;
}

template <class F>
void resolve(void* lib, const char* symbol, F& out) {
  void* p = dlsym(lib, symbol);
  if (p == nullptr)
    throw std::runtime_error(std::string("cuBLAS: ") + kSoname + " has no " + symbol +
                             " (a cuBLAS older than the headers ShardLab was built with?)");
  out = reinterpret_cast<F>(p);
}

CublasApi load() {
  std::string why;
  void* lib = open_library(why);
  if (lib == nullptr)
    throw std::runtime_error(std::string("cuBLAS could not be loaded (") + kSoname + "): " + why);
  // The names the <cublas_v2.h> macros expand to.
  CublasApi api{};
  resolve(lib, "cublasCreate_v2", api.create);
  resolve(lib, "cublasDestroy_v2", api.destroy);
  resolve(lib, "cublasSetStream_v2", api.set_stream);
  resolve(lib, "cublasGetStream_v2", api.get_stream);
  resolve(lib, "cublasSetMathMode", api.set_math_mode);
  resolve(lib, "cublasSetAtomicsMode", api.set_atomics_mode);
  resolve(lib, "cublasSgemm_v2", api.sgemm);
  resolve(lib, "cublasSgemmStridedBatched", api.sgemm_strided_batched);
  resolve(lib, "cublasGetStatusName", api.status_name);
  resolve(lib, "cublasGetStatusString", api.status_string);
  return api;  // the library stays open for the life of the process
}

const CublasApi* try_api() noexcept {
  try {
    return &cublas_api();
  } catch (...) {
    return nullptr;
  }
}

}  // namespace

const CublasApi& cublas_api() {
  static const CublasApi api = load();  // a throw leaves it unset: the next call tries again
  return api;
}

const char* cublas_status_name(cublasStatus_t status) noexcept {
  const CublasApi* api = try_api();
  return api != nullptr ? api->status_name(status) : "CUBLAS_STATUS_?";
}

const char* cublas_status_string(cublasStatus_t status) noexcept {
  const CublasApi* api = try_api();
  return api != nullptr ? api->status_string(status) : "cuBLAS is not loaded";
}

void destroy_cublas_handle(cublasHandle_t handle) noexcept {
  if (handle == nullptr) return;
  if (const CublasApi* api = try_api()) (void)api->destroy(handle);
}

}  // namespace shardlab::kernels
