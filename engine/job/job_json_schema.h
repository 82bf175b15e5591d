// A JSON Schema (draft 2020-12) of job files, generated from the job field table (job_fields.h):
// every section an object that takes no other keys, every field its JSON type, default, choices
// ("enum") and fixed range ("minimum"/"maximum"), and a description saying when the field is used.
// `shardlab job-schema` prints it so that editors complete and check job files. Nothing here is a
// second copy of a field fact: change the table and the schema follows.
//
// The schema checks what one field can say alone (types, choices, ranges, unknown keys); rules
// across fields (a batch divisible by the world size, ...) stay validate()'s (job_spec.h).
#pragma once

#include <nlohmann/json_fwd.hpp>

namespace shardlab {

nlohmann::ordered_json job_json_schema();

}  // namespace shardlab
