// Limits on the JSON that ShardLab reads from files and the command line (job files, --set values,
// checkpoint manifests, shard headers, the app's job editor), checked on the text itself before a
// parser builds a document from it:
//  - nesting depth: nlohmann's parser is iterative, but copying, comparing, dumping or walking a
//    document recurses once per level, so a file of 100,000 '[' would exhaust the stack of
//    whatever touched the document next (`shardlab checkpoint inspect` died with SIGSEGV);
//  - numbers beyond double's range (1e400): the parser throws its own exception for them, which
//    names no field (`shardlab run` said "internal error", the app aborted).
// Each reader turns the problem into its one-line error naming the file or the option. The scan
// is linear and allocates only the open containers' keys; it needs no JSON library (engine/core
// does not depend on one).
#pragma once

#include <fmt/format.h>

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "engine/core/display_text.h"

namespace shardlab {

// The deepest nesting of arrays and objects accepted anywhere. ShardLab's own documents nest at
// most a handful of levels (a job's model.mlp.hidden is 3 containers deep, a shard header's runs
// 3); 64 leaves room for any hand-written file and keeps every recursive walk to a few KiB of
// stack.
inline constexpr int kMaxJsonDepth = 64;

// A problem found in JSON text.
struct JsonTextProblem {
  std::string field;    // dotted path of the value: "optimizer.lr", "shards[2].bytes"; "" for the
                        // document
  std::string message;  // "nested deeper than 64 levels", "1e400 is out of range (not a finite
                        // number)"
  // "optimizer.lr: 1e400 is out of range (not a finite number)"
  std::string to_string() const { return field.empty() ? message : field + ": " + message; }
};

namespace json_limits_detail {

struct Frame {
  bool object = false;
  bool expect_key = false;  // an object before a member's key
  std::string key;          // an object's current member
  int64_t index = 0;        // an array's current element
};

// Whether `c` is one of the characters of `set` (never the terminating '\0').
inline bool one_of(char c, std::string_view set) {
  return set.find(c) != std::string_view::npos;
}

// The dotted path of the value the innermost frame is at ("model.mlp.hidden[1]"), each key as
// display_text() shows it (a raw newline or ESC inside a key, which the parser refuses only later,
// must not reach the message).
inline std::string path_of(const std::vector<Frame>& frames) {
  std::string path;
  for (const Frame& f : frames) {
    if (f.object) {
      if (!path.empty()) path += '.';
      path += display_text(f.key);
    } else {
      path += fmt::format("[{}]", f.index);
    }
  }
  return path;
}

// Whether the JSON number `token` lies beyond double's range (|x| > DBL_MAX). Underflow (1e-400)
// is not a problem: JSON parsers read it as 0 or a subnormal. Sets `valid` to false for a token
// that is no number at all (left for the parser to report).
inline bool overflows_double(std::string_view token, bool& valid) {
  double x = 0;
  const char* end = token.data() + token.size();
  const auto [ptr, ec] = std::from_chars(token.data(), end, x);
  valid = ptr == end && ec != std::errc::invalid_argument;
  if (!valid || ec != std::errc::result_out_of_range) return false;
  // Out of range either way: an overflow when the value is >= 1, i.e. when the decimal exponent
  // of its first significant digit (plus the written exponent) is >= 0.
  size_t i = token[0] == '-' ? 1 : 0;
  int64_t lead = 0;  // decimal exponent of the first non-zero digit, before the written exponent
  bool found = false;
  int64_t int_digits = 0;
  for (; i < token.size() && token[i] >= '0' && token[i] <= '9'; ++i, ++int_digits)
    if (!found && token[i] != '0') found = true, lead = -int_digits;
  if (found) lead += int_digits - 1;
  if (i < token.size() && token[i] == '.') {
    int64_t frac = 0;
    for (++i; i < token.size() && token[i] >= '0' && token[i] <= '9'; ++i) {
      ++frac;
      if (!found && token[i] != '0') found = true, lead = -frac;
    }
  }
  int64_t exponent = 0;
  if (i < token.size() && (token[i] == 'e' || token[i] == 'E')) {
    ++i;
    const bool negative = i < token.size() && token[i] == '-';
    if (i < token.size() && (token[i] == '-' || token[i] == '+')) ++i;
    for (; i < token.size(); ++i)
      if (exponent < (int64_t{1} << 40)) exponent = exponent * 10 + (token[i] - '0');
    if (negative) exponent = -exponent;
  }
  return found && lead + exponent >= 0;
}

}  // namespace json_limits_detail

// The first problem of the JSON `text`, or none: nesting deeper than kMaxJsonDepth (counting
// `enclosing_levels` containers that hold the text, e.g. a --set value's key segments), or a number
// beyond double's range, with the dotted path of its field. Brackets are counted wherever they lie
// outside strings, so the depth bound holds for any text, well-formed or not; the path of a number
// is given while the text reads as JSON (text that does not is left for the parser to report).
inline std::optional<JsonTextProblem> json_text_problem(std::string_view text,
                                                        int enclosing_levels = 0) {
  using json_limits_detail::Frame;
  const auto too_deep = [] {
    return JsonTextProblem{"", fmt::format("nested deeper than {} levels", kMaxJsonDepth)};
  };
  if (enclosing_levels > kMaxJsonDepth) return too_deep();
  std::vector<Frame> frames;
  bool tracking = true;  // the text reads as JSON so far: paths are meaningful
  size_t i = text.substr(0, 3) == "\xEF\xBB\xBF" ? 3 : 0;  // a UTF-8 byte order mark
  while (i < text.size()) {
    const char c = text[i];
    if (c == '"') {
      size_t j = i + 1;
      while (j < text.size() && text[j] != '"') j += text[j] == '\\' ? 2 : 1;
      if (j >= text.size()) break;  // unterminated: nothing after it is outside a string
      if (!frames.empty() && frames.back().object && frames.back().expect_key) {
        frames.back().key.assign(text.substr(i + 1, j - i - 1));
        frames.back().expect_key = false;
      }
      i = j + 1;
    } else if (c == '[' || c == '{') {
      if (enclosing_levels + static_cast<int>(frames.size()) + 1 > kMaxJsonDepth) return too_deep();
      frames.push_back({c == '{', c == '{', {}, 0});
      ++i;
    } else if (c == ']' || c == '}') {
      if (frames.empty())
        tracking = false;
      else
        frames.pop_back();
      ++i;
    } else if (c == ',') {
      if (!frames.empty()) {
        if (frames.back().object)
          frames.back().expect_key = true;
        else
          ++frames.back().index;
      }
      ++i;
    } else if (c == ':' || c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      ++i;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      size_t j = i;
      while (j < text.size() && json_limits_detail::one_of(text[j], "0123456789+-.eE")) ++j;
      const std::string_view token = text.substr(i, j - i);
      // A number ends the value: a letter or other character right after it makes no JSON number.
      const bool delimited = j == text.size() || json_limits_detail::one_of(text[j], " \t\r\n,]}");
      const bool in_key = !frames.empty() && frames.back().object && frames.back().expect_key;
      bool valid = false;
      const bool overflows = json_limits_detail::overflows_double(token, valid);
      if (!valid || !delimited || in_key) tracking = false;
      if (tracking && overflows) {
        const std::string shown =
            token.size() > 40 ? std::string(token.substr(0, 37)) + "..." : std::string(token);
        return JsonTextProblem{json_limits_detail::path_of(frames),
                               shown + " is out of range (not a finite number)"};
      }
      i = j;
    } else if (c >= 'a' && c <= 'z') {  // true, false, null (anything else: the parser says)
      while (i < text.size() && text[i] >= 'a' && text[i] <= 'z') ++i;
    } else {
      tracking = false;  // not JSON here; brackets are still counted
      ++i;
    }
  }
  return std::nullopt;
}

}  // namespace shardlab
