#include "engine/comm/mpi/liveness.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "engine/comm/mpi/mpi_util.h"
#include "engine/core/human_format.h"

namespace shardlab::mpi_detail {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int kProbeTag = 4242;
constexpr auto kMaxWindow = milliseconds(5000);
// How long a cancelled receive may take to settle before its request is let go.
constexpr auto kCancelGrace = milliseconds(50);

// Every probe message is two ints on one tag: {kind, generation}. A probe sends a request
// {kRequest, g} to every other rank, g being this process's probe generation (each probe takes the
// next one); a rank that is probing answers every request it receives with {kEcho, g}. A peer
// counts as alive only when its echo of the current generation arrives: a request or echo left
// over from an earlier probe (stale) proves nothing about now, so the receive is posted again.
// One tag, so what one peer sends is matched in order: its echo of our request comes after its own
// request, so once every peer has echoed we have answered every peer's request too, and can stop.
constexpr int kRequest = 0;
constexpr int kEcho = 1;
using Message = std::array<int, 2>;

// The buffers of one probe. A request that does not finish in the window is let go (freed, still
// active inside MPI), and MPI may still write into or read from its buffer later: then the
// buffers are never freed (a few bytes per such probe).
struct ProbeBuffers {
  std::vector<Message> landing;  // by world rank: where the next message from it lands
  std::deque<Message> outgoing;  // every message sent (stable addresses)
};

struct Probe {
  std::mutex mu;  // held for a whole probe (and by install): one probe at a time
  MPI_Comm comm = MPI_COMM_NULL;
  // What the running (or last) probe has seen so far, for callers that arrive while it runs:
  // they read it instead of waiting a whole window more.
  std::mutex state_mu;
  bool running = false;
  Clock::time_point started{};
  std::vector<bool> answered;     // by world rank
  std::string last;               // the last probe's verdict
  Clock::time_point last_done{};  // when it finished
  int generation = 0;             // of the last probe this process started (mu held)
};

Probe& probe_state() {
  static Probe* p = new Probe;  // never destroyed: a signal watcher may use it during exit
  return *p;
}

struct Board {
  std::mutex mu;
  std::vector<std::pair<const void*, std::string>> entries;
};

Board& board() {
  static Board* b = new Board;
  return *b;
}

bool finalized() {
  int f = 0;
  MPI_Finalized(&f);
  return f != 0;
}

std::string seconds(milliseconds ms) {
  if (ms.count() % 1000 == 0) return fmt::format("{} s", ms.count() / 1000);
  return fmt::format("{:.1f} s", static_cast<double>(ms.count()) / 1000.0);
}

// state_mu held.
std::string verdict(const std::vector<bool>& answered, milliseconds window) {
  std::vector<int> silent;
  for (size_t r = 0; r < answered.size(); ++r)
    if (!answered[r]) silent.push_back(static_cast<int>(r));
  if (silent.empty())
    return fmt::format(
        "every world rank answered a liveness probe within {} (none is dead: look for one that "
        "is late or never issued this operation)",
        seconds(window));
  return fmt::format(
      "{} {} did not answer a liveness probe within {} (dead, or stuck outside communication)",
      silent.size() == 1 ? "world rank" : "world ranks",
      shardlab::rank_list(silent, {.last = " and "}), seconds(window));
}

}  // namespace

void install_liveness_comm(MPI_Comm comm) {
  Probe& p = probe_state();
  std::lock_guard lock(p.mu);
  if (p.comm != MPI_COMM_NULL && !finalized()) MPI_Comm_free(&p.comm);
  p.comm = comm;
  if (comm != MPI_COMM_NULL) MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
}

milliseconds liveness_window(milliseconds timeout) {
  return std::clamp(timeout, milliseconds(1), kMaxWindow);
}

std::string probe_liveness(milliseconds window) {
  Probe& p = probe_state();
  const auto asked = Clock::now();
  std::unique_lock lock(p.mu, std::try_to_lock);
  if (!lock.owns_lock()) {
    // A probe is running (another thread timed out, or was stopped, at the same moment): its
    // result once it ends, or what it has seen once it has run this caller's window.
    for (;;) {
      {
        std::lock_guard state(p.state_mu);
        if (p.last_done >= asked && !p.last.empty()) return p.last;
        if (p.running && Clock::now() - p.started >= window) return verdict(p.answered, window);
        if (!p.running && Clock::now() - asked >= milliseconds(100)) break;  // between probes
      }
      if (Clock::now() - asked >= window + milliseconds(500)) return "";
      std::this_thread::sleep_for(milliseconds(1));
    }
    if (!lock.try_lock()) return "";
  }
  if (p.comm == MPI_COMM_NULL || finalized()) return "";
  int rank = 0, size = 1;
  if (MPI_Comm_rank(p.comm, &rank) != MPI_SUCCESS || MPI_Comm_size(p.comm, &size) != MPI_SUCCESS)
    return "";
  if (size < 2) return "";
  {
    std::lock_guard state(p.state_mu);
    p.running = true;
    p.started = Clock::now();
    p.answered.assign(static_cast<size_t>(size), false);
    p.answered[static_cast<size_t>(rank)] = true;
  }
  const int generation = ++p.generation;
  auto* buf = new ProbeBuffers;
  buf->landing.assign(static_cast<size_t>(size), Message{-1, -1});
  std::vector<MPI_Request> recvs(static_cast<size_t>(size), MPI_REQUEST_NULL);
  std::vector<MPI_Request> sends;
  const auto post_recv = [&](int r) {
    auto& q = recvs[static_cast<size_t>(r)];
    if (MPI_Irecv(buf->landing[static_cast<size_t>(r)].data(), 2, MPI_INT, r, kProbeTag, p.comm,
                  &q) != MPI_SUCCESS)
      q = MPI_REQUEST_NULL;
  };
  const auto send = [&](int r, int kind, int gen) {
    buf->outgoing.push_back(Message{kind, gen});
    MPI_Request q = MPI_REQUEST_NULL;
    if (MPI_Isend(buf->outgoing.back().data(), 2, MPI_INT, r, kProbeTag, p.comm, &q) ==
            MPI_SUCCESS &&
        q != MPI_REQUEST_NULL)
      sends.push_back(q);
  };
  for (int r = 0; r < size; ++r) {
    if (r == rank) continue;
    post_recv(r);
    send(r, kRequest, generation);
  }
  const auto deadline = Clock::now() + window;
  std::vector<bool> answered(static_cast<size_t>(size), false);
  answered[static_cast<size_t>(rank)] = true;
  for (;;) {
    bool all = true;
    for (int r = 0; r < size; ++r) {
      if (r == rank) continue;
      auto& q = recvs[static_cast<size_t>(r)];
      // Every message already here from r, in order (a bounded number: r sends one request per
      // probe and one echo per request of ours).
      int done = 0;
      while (q != MPI_REQUEST_NULL && MPI_Test(&q, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS &&
             done) {
        const Message m = buf->landing[static_cast<size_t>(r)];
        post_recv(r);
        if (m[0] == kRequest) {
          send(r, kEcho, m[1]);  // r is probing: answer it, whichever generation it is at
        } else if (m[0] == kEcho && m[1] == generation && !answered[static_cast<size_t>(r)]) {
          answered[static_cast<size_t>(r)] = true;
          std::lock_guard state(p.state_mu);
          p.answered[static_cast<size_t>(r)] = true;
        }  // else an echo of an earlier probe: stale
        done = 0;
      }
      if (!answered[static_cast<size_t>(r)]) all = false;
    }
    if (all || Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  // Let go of what did not complete: receives are cancelled, sends (eager for two ints, so
  // normally done) are left to MPI; then MPI_Finalize must not wait for them.
  bool left = false;
  for (int r = 0; r < size; ++r) {
    auto& q = recvs[static_cast<size_t>(r)];
    if (q == MPI_REQUEST_NULL) continue;
    MPI_Cancel(&q);
    const auto until = Clock::now() + kCancelGrace;
    int done = 0, cancelled = 0;
    MPI_Status status;
    while (MPI_Test(&q, &done, &status) == MPI_SUCCESS && !done && Clock::now() < until)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    if (!done) {
      if (q != MPI_REQUEST_NULL) MPI_Request_free(&q);
      left = true;
      continue;
    }
    // It completed instead of being cancelled: a request of a peer's probe that arrived just now
    // is still answered (an echo is only ever proof for that peer's own probe).
    MPI_Test_cancelled(&status, &cancelled);
    const Message m = buf->landing[static_cast<size_t>(r)];
    if (!cancelled && m[0] == kRequest) send(r, kEcho, m[1]);
  }
  for (auto& q : sends) {
    int done = 0;
    if (MPI_Test(&q, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || !done) {
      if (q != MPI_REQUEST_NULL) MPI_Request_free(&q);
      left = true;
    }
  }
  if (left)
    add_unfinished(+1);
  else
    delete buf;
  std::lock_guard state(p.state_mu);
  p.running = false;
  p.last = verdict(answered, window);
  p.last_done = Clock::now();
  return p.last;
}

void enter_operation(const void* key, const std::string& what) {
  Board& b = board();
  std::lock_guard lock(b.mu);
  b.entries.emplace_back(key, what);
}

void leave_operation(const void* key) {
  Board& b = board();
  std::lock_guard lock(b.mu);
  for (auto it = b.entries.begin(); it != b.entries.end(); ++it)
    if (it->first == key) {
      b.entries.erase(it);
      return;
    }
}

std::string operations_in_flight() {
  Board& b = board();
  std::lock_guard lock(b.mu);
  std::string s;
  for (const auto& [key, what] : b.entries) {
    if (!s.empty()) s += "; ";
    s += what;
  }
  return s;
}

}  // namespace shardlab::mpi_detail
