// libFuzzer target: a job file as `shardlab run JOB.json` reads it (engine/job/job_spec.h), and as
// the app's job editor checks it. Feeds the input as the file's text to parse_job_json (JSON, keys
// repeated), then job_from_json (unknown keys, types, then validate(): ranges, choices,
// cross-field rules, the optimizer registry, the topology), and check_job_json, which the editor
// shows beside the fields.
//
// A finding (fuzz_common.h): a crash, an ASan/UBSan report, an exception that is not a
// shardlab::Error (or an InternalError), an error message that is not one printable line, a
// timeout or an allocation over the limit; and these contracts: job_from_json accepts the document
// exactly when check_job_json finds no problem, and a job that reads back writes a document that
// reads back to the same job (job_from_json(job_to_json(j)) == j, job_spec.h), also after a trip
// through its text.
// Each input runs on a 256 KiB stack (fuzz::on_small_stack), so that recursion driven by nesting
// the reader failed to bound overflows within -max_len.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/job/job_spec.h"

#include <nlohmann/json.hpp>
#include "tests/fuzz/fuzz_common.h"

using namespace shardlab;

namespace {

void read_input(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  nlohmann::json doc;
  if (!fuzz::value_or_error([&] { doc = parse_job_json(text, "job.json"); })) return;

  JobSpec job;
  const bool accepted = fuzz::value_or_error([&] { job = job_from_json(doc); });
  std::vector<FieldError> problems;
  if (fuzz::value_or_error([&] { problems = check_job_json(doc); }))
    fuzz::check(accepted == problems.empty(),
                accepted ? "job_from_json accepted a job that check_job_json finds problems in"
                         : "job_from_json refused a job that check_job_json finds no problem in");
  if (!accepted) return;

  // What `shardlab run` then holds, written out (save_job, the app) and read again.
  nlohmann::json written;
  fuzz::check(fuzz::value_or_error([&] { written = job_to_json(job); }),
              "job_to_json refused a job that job_from_json accepted");
  JobSpec again, reparsed;
  fuzz::check(fuzz::value_or_error([&] { again = job_from_json(written); }),
              "job_to_json wrote a document that job_from_json refuses");
  fuzz::check(again == job, "job_from_json(job_to_json(j)) != j");
  fuzz::check(fuzz::value_or_error(
                  [&] { reparsed = job_from_json(parse_job_json(written.dump(2), "saved.json")); }),
              "a job saved as text does not read back");
  fuzz::check(reparsed == job, "a job saved as text reads back to another job");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::on_small_stack(fuzz::kReaderStack, [&] { read_input(data, size); });
  return 0;
}
