// Runs across several machines: the host list a user gives (`--hosts h1:2,h2:2`, Open MPI's
// --host syntax, or `--hostfile F`, Open MPI's hostfile format), the mpirun arguments a cluster
// run needs on top of the ones every mpirun gets (mpirun.h), and the address of this machine the
// hosts reach it on (where the run's collector listens). One source for `shardlab run`, `shardlab
// doctor --hosts` and the app's mpirun mode.
//
// The settings a cluster needs, each given only when the user's own Open MPI configuration does
// not set it (an OMPI_MCA_<name> variable, $HOME/.openmpi/mca-params.conf, the system's
// openmpi-mca-params.conf or a file named by mca_base_param_files): a site's launcher agent,
// interfaces and transports win over ShardLab's defaults.
//   oob_tcp_keepalive_time 5, _intvl 2, _probes 3   a lost host ends the job ~11 s after it goes
//                                                    (Open MPI's default waits for ever)
//   btl tcp,vader,self                               TCP between hosts, shared memory within one
// and `-x` for the variables the ranks need on every host (the collector's token, the BLAS
// thread count): mpirun forwards them through its own connection, never on a command line.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace shardlab::launch {

struct HostSlots {
  std::string host;
  int slot_count = 1;
};

struct HostList {
  std::vector<HostSlots> hosts;  // in order; empty: this machine only (no host arguments)
  std::string hostfile;          // the file they came from ("" for --hosts)

  bool empty() const { return hosts.empty(); }
  int total_slots() const;  // the sum of every host's slots
  // "h1:2,h2:2", Open MPI's --host syntax.
  std::string text() const;
  // The ranks of a world of `world` on `host` under Open MPI's default placement across hosts
  // (each host's slots filled in order: h1:2,h2:2 puts ranks 0, 1 on h1 and 2, 3 on h2); empty
  // for a host not in the list.
  std::vector<int> ranks_of(const std::string& host, int world) const;
};

// "h1:2,h2:2" or "h1,h2" (one slot each). InvalidArgument naming `flag` for an empty list, an
// empty host name, a host named twice, or a slot count that is not an integer from 1 to 4096.
HostList parse_hosts(const std::string& list, const std::string& flag = "--hosts");

// Open MPI's hostfile: one host per line, `HOST [slots=N] [max_slots=N]`, '#' comments and blank
// lines ignored; a host without slots= counts 1 here (Open MPI would count its cores). IoError when
// the file cannot be read; FormatError naming the file and line for anything else.
HostList read_hostfile(const std::string& path);

// The mpirun arguments for `hosts` (empty list: none): {"--host", text} or {"--hostfile", F}, the
// cluster settings above that the user's configuration leaves unset, and {"-x", NAME} for each of
// `forward`. InvalidArgument when `ranks` exceeds hosts.total_slots() (naming both).
std::vector<std::string> cluster_mpirun_args(const HostList& hosts, int ranks,
                                             const std::vector<std::string>& forward);

// True when the user's Open MPI configuration sets MCA parameter `name` (see the header).
bool mca_param_set_by_user(const std::string& name);

// The address of this machine that `host` is reached from (the source address the kernel picks
// for a packet to it), as text: where a collector for workers on that host listens. IoError
// naming the host when it cannot be resolved or has no route.
std::string local_address_towards(const std::string& host);

// "HOST:PORT", an IPv6 address in brackets ("[::1]:7070").
std::string host_port(const std::string& host, uint16_t port);

// Where the collector for ranks on `hosts` listens: "127.0.0.1:0" when they run on this machine
// (an empty list), else host_port(local_address_towards(the first host), 0).
std::string collector_listen_for(const HostList& hosts);

}  // namespace shardlab::launch
