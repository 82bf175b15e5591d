// The helpers declared in mpi_util.h: MPI error text and the return-code check, the count of
// operations still inside MPI after their wait gave up, and the Backoff between two polls.
#include "engine/comm/mpi/mpi_util.h"

#include <algorithm>
#include <atomic>
#include <thread>

namespace shardlab {
namespace mpi_detail {
namespace {

std::atomic<int> g_unfinished{0};
std::atomic<int64_t> g_hot_spin_ns{0};

}  // namespace

bool mpi_finalized() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  return finalized != 0;
}

std::string error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return fmt::format("MPI error {}", code);
  return std::string(text, static_cast<size_t>(len));
}

int unfinished_operations() {
  return g_unfinished.load();
}
void add_unfinished(int delta) {
  g_unfinished += delta;
}

void throw_mpi_error(int code, const char* call, const char* file, int line) {
  std::string name(call);
  name.resize(std::min(name.size(), name.find('(')));
  throw CommError(fmt::format("{} failed: {}", name, error_string(code)),
                  detail::where(file, line, call));
}

void set_hot_spin(std::chrono::nanoseconds spin) {
  g_hot_spin_ns = spin.count();
}

void Backoff::pause() {
  using namespace std::chrono;
  const auto waited = steady_clock::now() - start_;
  // Hot: notice a completion within a poll or two (a yield costs about a microsecond here, which
  // measured as 2-3% of a 1 MiB all-reduce when paid in the arrival gate).
  if (waited.count() < g_hot_spin_ns.load(std::memory_order_relaxed)) return;
  if (waited < milliseconds(2)) {
    std::this_thread::yield();
    return;
  }
  std::this_thread::sleep_for(
      std::clamp<nanoseconds>(waited / 50, microseconds(20), milliseconds(1)));
}

}  // namespace mpi_detail
}  // namespace shardlab
