#include "engine/job/job_spec.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <utility>

#include "engine/core/display_text.h"
#include "engine/core/error.h"
#include "engine/core/json_limits.h"
#include "engine/job/job_schema.h"
#include "engine/job/overrides.h"

namespace shardlab {

using job_detail::join_path;
using job_detail::write_job;
using nlohmann::json;

namespace {

// True when one dotted path is the other or lies inside it ("a.b" and "a.b.c" or "a.b[2]").
bool overlaps(const std::string& a, const std::string& b) {
  const std::string& shorter = a.size() <= b.size() ? a : b;
  const std::string& longer = a.size() <= b.size() ? b : a;
  if (shorter.empty()) return true;
  if (longer.compare(0, shorter.size(), shorter) != 0) return false;
  return longer.size() == shorter.size() || longer[shorter.size()] == '.' ||
         longer[shorter.size()] == '[';
}

// 1-based line and column of the 1-based byte offset `byte` in `text`.
std::pair<size_t, size_t> line_col(const std::string& text, size_t byte) {
  const size_t end = std::min(byte == 0 ? 0 : byte - 1, text.size());
  size_t line = 1, line_start = 0;
  for (size_t i = 0; i < end; ++i)
    if (text[i] == '\n') ++line, line_start = i + 1;
  return {line, end - line_start + 1};
}

}  // namespace

// -----------------------------------------------------------------------------------------------

bool operator==(const JobSpec& a, const JobSpec& b) {
  return job_to_json(a) == job_to_json(b);
}

std::string FieldError::to_string() const {
  return field.empty() ? message : field + ": " + message;
}

std::vector<FieldError> check_job_json(const json& doc, JobSpec* out) {
  JobSpec job;
  std::vector<FieldError> errors;
  job_detail::read_job(doc, job, errors);
  // A field that failed to read holds its default; leave out what that would cause.
  const size_t structural = errors.size();
  for (auto& e : validate(job)) {
    const bool shadowed =
        std::any_of(errors.begin(), errors.begin() + structural,
                    [&](const FieldError& s) { return overlaps(s.field, e.field); });
    if (!shadowed) errors.push_back(std::move(e));
  }
  if (out) *out = std::move(job);
  return errors;
}

JobSpec job_from_json(const json& doc) {
  JobSpec job;
  const auto errors = check_job_json(doc, &job);
  if (!errors.empty()) {
    const size_t more = errors.size() - 1;
    SL_THROW(InvalidArgument, "{}{}", errors.front().to_string(),
             more ? fmt::format(" (and {} more problem{})", more, more > 1 ? "s" : "") : "");
  }
  return job;
}

json job_to_json(const JobSpec& job) {
  return write_job<json>(job);
}

json read_job_json(const std::string& path) {
  const std::string shown = display_text(path, kMaxDisplayPathBytes);
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    SL_THROW(IoError, "cannot read job file {}: is a directory", shown);
  std::ifstream in(path, std::ios::binary);
  if (!in) SL_THROW(IoError, "cannot open job file {}: {}", shown, std::strerror(errno));
  // Bounded before it is held (kMaxJobFileBytes); a pipe or process substitution still works.
  std::string text;
  char chunk[1 << 16];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    text.append(chunk, static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxJobFileBytes)
      SL_THROW(FormatError, "{}: larger than {} MiB, not a job file", shown,
               kMaxJobFileBytes >> 20);
  }
  if (in.bad()) SL_THROW(IoError, "cannot read job file {}", shown);
  return parse_job_json(text, path);
}

json parse_job_json(const std::string& text, const std::string& source) {
  const std::string shown = display_text(source, kMaxDisplayPathBytes);
  // nlohmann keeps the last of repeated keys; in a job file a repeat is a mistake, so the parser
  // callback tracks the keys seen in each open object.
  struct Frame {
    bool is_object;
    std::set<std::string> keys;
    std::string key;
  };
  std::vector<Frame> frames;
  std::string duplicate;
  const json::parser_callback_t on_event = [&](int, json::parse_event_t event, json& parsed) {
    using E = json::parse_event_t;
    if (event == E::object_start || event == E::array_start) {
      frames.push_back({event == E::object_start, {}, {}});
    } else if (event == E::object_end || event == E::array_end) {
      if (!frames.empty()) frames.pop_back();
    } else if (event == E::key && !frames.empty()) {
      Frame& f = frames.back();
      f.key = parsed.get<std::string>();
      if (!f.keys.insert(f.key).second && duplicate.empty()) {
        for (const Frame& open : frames)
          duplicate =
              open.is_object ? join_path(duplicate, display_text(open.key)) : duplicate + "[]";
      }
    }
    return true;
  };

  // Nesting and numbers beyond double's range first, on the text: one line naming the field
  // ("job.json: optimizer.lr: 1e400 is out of range (not a finite number)") before any document
  // exists that something could recurse over.
  if (const auto problem = json_text_problem(text))
    SL_THROW(FormatError, "{}: {}", shown, problem->to_string());

  json doc;
  try {
    doc = json::parse(text, on_event);
  } catch (const json::parse_error& e) {
    const auto [line, col] = line_col(text, e.byte);
    // what() is "[json.exception.parse_error.101] parse error at line L, column C: <detail>".
    std::string detail = e.what();
    const size_t at = detail.find(": ", detail.find("parse error"));
    if (at != std::string::npos) detail = detail.substr(at + 2);
    SL_THROW(FormatError, "{}:{}:{}: invalid JSON: {}", shown, line, col, detail);
  } catch (const json::exception& e) {
    // Anything else the parser refuses (a number out of range where the text is not JSON before
    // it): still one line naming the file, never the library's exception.
    std::string detail = e.what();
    if (const size_t at = detail.find("] "); at != std::string::npos)
      detail = detail.substr(at + 2);
    SL_THROW(FormatError, "{}: invalid JSON: {}", shown, detail);
  }
  if (!duplicate.empty())
    SL_THROW(FormatError, "{}: {}: key appears more than once", shown, duplicate);
  return doc;
}

JobSpec load_job(const std::string& path, const std::vector<std::string>& overrides) {
  json doc = read_job_json(path);
  for (const auto& o : overrides) apply_override(doc, o);
  return job_from_json(doc);
}

void save_job(const JobSpec& job, const std::string& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out)
    SL_THROW(IoError, "cannot write job file {}: {}", display_text(path, kMaxDisplayPathBytes),
             std::strerror(errno));
  out << write_job<nlohmann::ordered_json>(job).dump(2) << '\n';
  out.flush();
  if (!out) SL_THROW(IoError, "cannot write job file {}", display_text(path, kMaxDisplayPathBytes));
}

}  // namespace shardlab
