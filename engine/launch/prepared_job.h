// PreparedJob: a job made ready to run, once, by the launch layer, and handed down as is to every
// run mode (threads, a worker's rank, the GPU path): nothing below derives these facts again.
//
// Where the launch layer sits: above the engine's rooms and above net (it runs net's collector
// and recordings for the mpirun mode and builds the ranks' HELLOs), below the two front ends,
// `shardlab` (engine/cli) and the app (gui/RunController). Never Qt. net does not link it.
//
//   kernels <- engine rooms (job, train, parallel, comm, ...) <- net <- engine/launch <- cli, gui
#pragma once

#include <optional>

#include "engine/comm/communicator.h"
#include "engine/data/datasets.h"
#include "engine/job/job_spec.h"
#include "engine/topology/topology.h"
#include "net/protocol.h"

namespace shardlab::launch {

struct PreparedJob {
  // The job; once loaded (has_data()), with the model sizes the data decides filled in
  // (complete_model_config).
  JobSpec job;
  Topology topology;  // job_topology(job): what the ranks announce and the grid draws
  CommOptions comm;   // the ranks' world: every wait bounded by parallel.timeout_s
  Datasets data;      // empty until load_data()

  bool has_data() const { return data.train != nullptr; }
  // The topology the communicators' records are mapped with: the job's when it uses pp or tp,
  // else none (RankRunOptions::comm_topology).
  std::optional<Topology> comm_topology() const;
  // The HELLO world rank `rank` announces from this process (host name, pid).
  net::Hello hello(int rank) const;
};

// The job's topology and communication options; reads nothing (what a worker needs before it
// joins its world, and the app before it starts its ranks). Throws InvalidArgument for a layout
// Topology::make refuses.
PreparedJob plan_job(const JobSpec& job);

// Reads the job's data and completes its model sizes (load_completed_data, engine/job/build.h); a
// second call does nothing. Throws IoError naming a missing file, InvalidArgument for a bad
// configuration.
void load_data(PreparedJob& prepared);

// plan_job + load_data.
PreparedJob prepare_job(const JobSpec& job);

}  // namespace shardlab::launch
