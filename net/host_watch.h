// HostWatch: tells a lost host from a slow or finished one, for a collector whose ranks run on
// several hosts. Fed on the collector's thread with what each rank's connection shows (its HELLO's
// host, when it was last heard from, its newest step, when it ended); asked once a second.
//
// A host is lost when every rank on it has been silent for `silence` seconds without having ended
// (a worker's publisher sends a heartbeat every second, so silence means the host or its link is
// gone, or its processes are frozen), and the collector has heard from a rank on another host, or
// seen one end, at least `evidence` seconds after this host went quiet: the collector itself is
// still connected to the cluster, so the fault is the host's. A run on one host never names it.
// When the job has ended (its launcher exited), settle() names the hosts whose ranks never said
// they ended while every rank elsewhere did, whatever the silence.
//
// The line it gives is the one failure every view shows: "host h2 (ranks 2, 3) lost at step 321:
// no answer for 10 s". The collector turns it into each rank's failed JOB_STATE (so the monitor,
// the recording and the replay say the same), and `shardlab run` ends with it.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace shardlab::net {

struct LostHost {
  std::string host;
  std::vector<int> ranks;     // ascending
  int64_t step = 0;           // the newest step a rank on it reported (0: none)
  double silent_seconds = 0;  // since its last word
  // "host h2 (ranks 2, 3) lost at step 321: no answer for 10 s" ("rank 2" for one; "before its
  // first step" when it had none).
  std::string line() const;
};

// What a rank's failure reason says when its host was lost: the host's name, or "" when the
// reason is not a LostHost::line().
std::string lost_host_of(const std::string& reason);

struct HostWatchOptions {
  double silence = 10;  // seconds without a word from any of a host's ranks
  double evidence = 5;  // another host heard from this long after this host's last word
};

class HostWatch {
 public:
  explicit HostWatch(HostWatchOptions options = {}) : options_(options) {}

  // Times are epoch seconds (the collector's clock). A new HELLO for a rank resets it.
  void hello(int rank, const std::string& host, double now);
  void heard(int rank, double now, int64_t step = -1);  // step >= 1 for a STEP event
  void ended(int rank, double now);                     // finished, failed, or its connection ended

  // The hosts lost by `now` (see the file comment), each named once.
  std::vector<LostHost> check(double now);
  // The job has ended: the hosts whose ranks have all not ended while every other host's have.
  std::vector<LostHost> settle(double now);

 private:
  struct Rank {
    std::string host;
    double last = 0;  // last word (HELLO, event, end)
    int64_t step = 0;
    bool ended = false;
  };
  std::vector<LostHost> lost_where(double now, bool at_end);

  HostWatchOptions options_;
  std::map<int, Rank> ranks_;
  std::set<std::string> named_;  // hosts reported lost
};

}  // namespace shardlab::net
