// Linked into the programs (shardlab, shardlab-gui) as an object of their own: a function in the
// executable's .preinit_array, which the dynamic loader runs before any shared library's
// initializers (the ELF gABI's DT_PREINIT_ARRAY), so before OpenBLAS's.
//
// Why: under a virtual-memory limit (`ulimit -v 1000000`, as some sites set on cluster nodes),
// OpenBLAS 0.3.21's initializer starts one thread per core, and each thread's buffer allocation
// retries a failing mmap for ever: every command hung, `--help` included (before main(), or at
// exit joining the thread). With OPENBLAS_NUM_THREADS=1 it starts at once (measured on this
// machine). So when the address space is limited and the user has not chosen a count
// (OPENBLAS_NUM_THREADS, GOTO_NUM_THREADS or OMP_NUM_THREADS), the program runs itself again with
// OPENBLAS_NUM_THREADS=1 added to its environment. A re-exec, because at this point libc has not
// initialised its own environment yet (setenv here would be lost when it does), and no library
// initializer has run, so nothing is undone. A worker started by mpirun inherits the variable.
#include <sys/resource.h>
#include <unistd.h>

#include <cstring>

namespace {

char kOneThread[] = "OPENBLAS_NUM_THREADS=1";
char* g_env[4096];  // the new environment (no malloc before libc is initialised)

bool starts_with(const char* s, const char* prefix) {
  return std::strncmp(s, prefix, std::strlen(prefix)) == 0;
}

void limit_blas_threads_under_rlimit_as(int, char** argv, char** env) {
  if (env == nullptr || argv == nullptr) return;
  size_t n = 0;
  for (; env[n] != nullptr; ++n)
    if (starts_with(env[n], "OPENBLAS_NUM_THREADS=") || starts_with(env[n], "GOTO_NUM_THREADS=") ||
        starts_with(env[n], "OMP_NUM_THREADS="))
      return;
  rlimit limit{};
  if (getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return;
  if (n + 2 > sizeof g_env / sizeof g_env[0]) return;
  for (size_t i = 0; i < n; ++i) g_env[i] = env[i];
  g_env[n] = kOneThread;
  g_env[n + 1] = nullptr;
  execve("/proc/self/exe", argv, g_env);  // returns only when it failed: go on as before
}

[[gnu::section(".preinit_array"),
  gnu::used]] void (*const preinit_blas)(int, char**, char**) = &limit_blas_threads_under_rlimit_as;

}  // namespace
