// `shardlab plan` on this machine and its own jobs: --calibrate (the machine measured into a
// cluster file, the mpi backend's meetings under mpirun) and --job (a job file predicted on such
// a file). plan_command.cpp dispatches here.
#pragma once

#include "engine/cli/args.h"

namespace shardlab::cli {

int plan_calibrate(const Args& args);
// Under mpirun, started by plan_calibrate: the meeting loop on the mpi backend; rank 0 writes the
// loop's seconds to --out.
int plan_calibrate_mpi_inner(const Args& args);
int plan_job(const Args& args);

}  // namespace shardlab::cli
