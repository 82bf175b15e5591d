// A small command-line parser for the shardlab subcommands: positional arguments, `--flag value`
// and `--flag=value` options (repeatable), and boolean switches. Unknown options are errors.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/core/error.h"

namespace shardlab::cli {

// A mistake on the command line: main() prints it with a usage hint and exits with status 2.
class UsageError : public InvalidArgument {
  using InvalidArgument::InvalidArgument;
};

struct ArgSpec {
  std::set<std::string> options;   // take a value: "--set", "--params"
  std::set<std::string> switches;  // take none: "--quiet"
};

class Args {
 public:
  Args(const std::vector<std::string>& argv, const ArgSpec& spec);

  const std::vector<std::string>& positional() const { return positional_; }
  // For subcommands that take options only: UsageError "unexpected argument '<first>'".
  void expect_no_positional() const;
  bool has(const std::string& name) const;
  std::vector<std::string> all(const std::string& name) const;
  // The last value of an option, or `fallback` when absent.
  std::string get(const std::string& name, const std::string& fallback = "") const;
  // Integer option with a range check; the message names the flag.
  int64_t get_int(const std::string& name, int64_t fallback, int64_t min, int64_t max) const;

 private:
  std::vector<std::string> positional_;
  std::multimap<std::string, std::string> values_;
};

// `flag`'s value as seconds, > 0 and at most 1e7 (UsageError naming the flag otherwise); `fallback`
// when absent.
double positive_seconds(const Args& args, const std::string& flag, double fallback);

}  // namespace shardlab::cli
