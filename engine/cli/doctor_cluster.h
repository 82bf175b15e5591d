// `shardlab doctor --cluster`: the cluster check (engine/doctor/cluster_checks.h) run by every rank
// of an MPI world, one rank per host; rank 0 prints the hosts, the pair matrix and the findings
// (or --json one document), the other ranks print nothing. Exit 1 when a finding names a host or a
// link, 0 on a healthy cluster. Its own entry point so that a launcher (`doctor --hosts`, which
// would start `mpirun ... shardlab doctor --cluster`) can build on it.
#pragma once

#include "engine/cli/args.h"

namespace shardlab::cli {

// Needs the process to be one rank of an mpirun world of at least 2 (InvalidArgument, one line,
// otherwise; also in a build without MPI). Reads --json from `args`.
int doctor_cluster(const Args& args);

}  // namespace shardlab::cli
