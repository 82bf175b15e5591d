// shardlab job-schema: the JSON Schema of job files (engine/job/job_json_schema.h) on stdout.
#include "engine/cli/args.h"
#include "engine/cli/command_spec.h"
#include "engine/cli/commands.h"
#include "engine/cli/json_output.h"
#include "engine/job/job_json_schema.h"

namespace shardlab::cli {

int job_schema_command(const std::vector<std::string>& argv) {
  const Args args(argv, arg_spec("job-schema"));
  args.expect_no_positional();
  print_json(job_json_schema());
  return 0;
}

}  // namespace shardlab::cli
