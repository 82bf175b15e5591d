// The job document's schema (internal to engine/job; not part of the public API): the one list of
// JobSpec fields and their keys, and the JSON reading and writing built on it. job_spec.cpp and
// job_validation.cpp share these; everything else goes through job_spec.h.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "engine/job/job_fields.h"
#include "engine/job/job_spec.h"

namespace shardlab::job_detail {

// "a.b" + "c" -> "a.b.c"; "" + "c" -> "c".
std::string join_path(const std::string& prefix, std::string_view key);

// The full document, every field present, sections and keys in schema order. Defined for
// nlohmann::json and nlohmann::ordered_json.
template <class Json>
Json write_job(const JobSpec& job);

extern template nlohmann::json write_job<nlohmann::json>(const JobSpec& job);
extern template nlohmann::ordered_json write_job<nlohmann::ordered_json>(const JobSpec& job);

// Every field's path, type and default (JobSpec{}'s), in document order; job_fields() adds the
// rest.
std::vector<JobField> schema_fields();

// Reads `doc` into `job`, checking JSON types only (values are validate()'s job). Appends to
// `errors` a problem for each key the schema does not know (with the closest known key suggested)
// and each value of the wrong type; such a field keeps the value it had in `job`.
void read_job(const nlohmann::json& doc, JobSpec& job, std::vector<FieldError>& errors);

}  // namespace shardlab::job_detail
