// The job document's fields as one public table: each field's dotted path, JSON type, default,
// allowed values and the settings under which it is used (model kind, dataset, optimizer,
// schedule, strategy, ...). The keys and types come from the schema that reads and writes job
// files (job_schema.cpp), the defaults from JobSpec{}, the optimizers' fields from the optimizer
// registry. Validation takes its choice lists from here and the app builds its job form from it:
// the form adds labels and layout only.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardlab {

enum class FieldType {
  string,
  boolean,
  number,            // double
  integer,           // int64
  unsigned_integer,  // uint64 (seeds)
  integer_list,
  string_list
};

// One test of another field's value (missing or mistyped values read as that field's default).
struct FieldTest {
  enum class Op {
    one_of,   // a string in `values`
    none_of,  // a string not in `values`
    above,    // an integer (truncated) > `threshold`
    not_empty
  };
  std::string path;  // the deciding field: "optimizer.name"
  Op op = Op::one_of;
  std::vector<std::string> values;
  int64_t threshold = 0;
};

struct JobField {
  std::string path;  // "optimizer.beta1"; sections are not listed, only their fields
  FieldType type = FieldType::string;
  nlohmann::json default_value;      // JobSpec{}'s value
  std::vector<std::string> choices;  // a string field's allowed values, in the order validation
                                     // lists them; empty when free
  // The field is used when any of these holds; empty: always.
  std::vector<FieldTest> used_when;
  // An integer's allowed range where the field has a fixed one (e.g. parallel.dp: -1 .. max world).
  std::optional<int64_t> min, max;
};

// Every field, in document order.
const std::vector<JobField>& job_fields();
// The field at `path`, or null.
const JobField* find_job_field(std::string_view path);
// The choices of the field at `path` (empty for an unknown path or a free field).
const std::vector<std::string>& field_choices(std::string_view path);
// Whether `field` is used by the job `doc` (any JSON: missing or mistyped values read as their
// defaults).
bool field_used(const JobField& field, const nlohmann::json& doc);
bool field_used(const JobField& field, const nlohmann::ordered_json& doc);

// The strategies that can run the data-parallel dimension of a 3D (pp x tp x dp) job.
const std::vector<std::string>& data_parallel_strategies();

}  // namespace shardlab
