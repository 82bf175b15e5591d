#include "engine/comm/threads/world.h"

#include <fmt/format.h>

#include <mutex>
#include <thread>

#include "engine/comm/threads/communicator.h"
#include "engine/comm/threads/group.h"

namespace shardlab {
namespace {

std::string message_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

}  // namespace

std::vector<std::unique_ptr<Communicator>> make_thread_world(int n, const CommOptions& options) {
  SL_ENFORCE(n >= 1, "a thread world needs at least one rank, got {}", n);
  SL_ENFORCE(!options.flight_recorder || n == 1,
             "a flight recorder is one rank's ring, but this thread world has {} ranks: leave "
             "CommOptions::flight_recorder empty and each rank gets its own (flight_capacity "
             "entries)",
             n);
  auto group = std::make_shared<threads_detail::Group>("world", n);
  std::vector<std::unique_ptr<Communicator>> world;
  world.reserve(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    world.push_back(
        std::make_unique<ThreadsCommunicator>(group, r, "world", world_rank_options(options, r)));
  }
  return world;
}

void run_threads(int n, const CommOptions& options, const std::function<void(Communicator&)>& fn) {
  auto world = make_thread_world(n, options);
  auto abort_all = [&](const std::string& reason) {
    // One group: aborting through any rank's communicator aborts it for everyone.
    static_cast<ThreadsCommunicator&>(*world[0]).abort(reason);
  };
  std::mutex mu;
  std::exception_ptr first;
  auto body = [&](int r) {
    try {
      fn(*world[static_cast<size_t>(r)]);
    } catch (...) {
      const std::exception_ptr e = std::current_exception();
      {
        std::lock_guard lock(mu);
        if (!first) first = e;
      }
      abort_all(fmt::format("rank {} of group world failed: {}", r, message_of(e)));
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(n));
  try {
    for (int r = 0; r < n; ++r) threads.emplace_back(body, r);
  } catch (...) {
    // Ranks already running would wait for the ones that never started.
    abort_all(fmt::format("could not start the thread of rank {}: {}", threads.size(),
                          message_of(std::current_exception())));
    for (auto& t : threads) t.join();
    throw;
  }
  for (auto& t : threads) t.join();
  world.clear();
  if (first) std::rethrow_exception(first);
}

}  // namespace shardlab
