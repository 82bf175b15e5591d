#include "engine/cli/args.h"

#include <cstdlib>

#include <charconv>

namespace shardlab::cli {

Args::Args(const std::vector<std::string>& argv, const ArgSpec& spec) {
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a.size() < 2 || a.rfind("--", 0) != 0) {
      if (!a.empty() && a[0] == '-' && a != "-") SL_THROW(UsageError, "unknown option '{}'", a);
      positional_.push_back(a);
      continue;
    }
    std::string name = a, value;
    const auto eq = a.find('=');
    const bool inline_value = eq != std::string::npos;
    if (inline_value) {
      name = a.substr(0, eq);
      value = a.substr(eq + 1);
    }
    if (spec.switches.count(name)) {
      if (inline_value) SL_THROW(UsageError, "option '{}' takes no value", name);
      values_.emplace(name, "");
    } else if (spec.options.count(name)) {
      if (!inline_value) {
        if (i + 1 >= argv.size()) SL_THROW(UsageError, "option '{}' needs a value", name);
        value = argv[++i];
      }
      values_.emplace(name, value);
    } else {
      SL_THROW(UsageError, "unknown option '{}'", name);
    }
  }
}

void Args::expect_no_positional() const {
  if (!positional_.empty()) SL_THROW(UsageError, "unexpected argument '{}'", positional_[0]);
}

bool Args::has(const std::string& name) const {
  return values_.count(name) > 0;
}

std::vector<std::string> Args::all(const std::string& name) const {
  std::vector<std::string> out;
  auto [lo, hi] = values_.equal_range(name);
  for (auto it = lo; it != hi; ++it) out.push_back(it->second);
  return out;
}

std::string Args::get(const std::string& name, const std::string& fallback) const {
  auto v = all(name);
  return v.empty() ? fallback : v.back();
}

int64_t Args::get_int(const std::string& name, int64_t fallback, int64_t min, int64_t max) const {
  if (!has(name)) return fallback;
  const std::string s = get(name);
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size())
    SL_THROW(UsageError, "option '{}' needs an integer, got '{}'", name, s);
  if (v < min || v > max)
    SL_THROW(UsageError, "option '{}' must be in [{}, {}], got {}", name, min, max, v);
  return v;
}

double positive_seconds(const Args& args, const std::string& flag, double fallback) {
  if (!args.has(flag)) return fallback;
  const std::string text = args.get(flag);
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !(v > 0) || v > 1e7)
    SL_THROW(UsageError, "{}: expected a positive number of seconds, got '{}'", flag, text);
  return v;
}

}  // namespace shardlab::cli
