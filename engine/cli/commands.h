// The shardlab subcommands. Each takes the arguments after its name and returns the exit status;
// errors are thrown and turned into one line by main().
#pragma once

#include <string>
#include <vector>

namespace shardlab::cli {

int run_command(const std::vector<std::string>& args);    // shardlab run JOB.json [--set k=v]...
int bench_command(const std::vector<std::string>& args);  // shardlab bench optimizer|mlp [...]
int bench_comm_command(const std::vector<std::string>& args);     // shardlab bench comm [...]
int bench_sharded_command(const std::vector<std::string>& args);  // shardlab bench sharded [...]
int bench_hybrid_command(const std::vector<std::string>& args);   // shardlab bench hybrid [...]
int worker_command(const std::vector<std::string>& args);         // shardlab worker JOB.json (mpi)
int checkpoint_command(const std::vector<std::string>& args);     // shardlab checkpoint inspect DIR
int info_command(const std::vector<std::string>& args);           // shardlab info
int monitor_command(const std::vector<std::string>& args);        // shardlab monitor --listen A:P
int replay_command(const std::vector<std::string>& args);         // shardlab replay RUN.slrec
int export_command(const std::vector<std::string>& args);         // shardlab export RUN.slrec ...
// shardlab bench telemetry [...]
int bench_telemetry_command(const std::vector<std::string>& args);
// shardlab bench web [...] (bench_web.cpp)
int bench_web_command(const std::vector<std::string>& args);
// shardlab doctor: this node's checks (doctor_command.cpp, engine/doctor)
int doctor_command(const std::vector<std::string>& args);
// shardlab plan: a large job's layouts, memory and step time (plan_command.cpp, engine/plan)
int plan_command(const std::vector<std::string>& args);
// shardlab job-schema: the JSON Schema of job files (job_schema_command.cpp)
int job_schema_command(const std::vector<std::string>& args);

}  // namespace shardlab::cli
