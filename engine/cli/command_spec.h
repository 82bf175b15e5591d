// The `shardlab` commands as data: one CommandSpec per command (its name, what follows the name,
// a one-line summary and every option it accepts), kept in one table (command_table.cpp). That
// table is the only source of
//   - the options a command's parser accepts: arg_spec("bench comm") builds the ArgSpec from it,
//     so an option the table does not list is "unknown option" and cannot be used at all;
//   - the help: `shardlab help`, `shardlab help COMMAND` and COMMAND --help / -h.
// A command reads its own options with Args as before; only where the accepted set comes from
// changed.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/cli/args.h"

namespace shardlab::cli {

struct OptionSpec {
  std::string name;   // "--steps"
  std::string value;  // what it takes, as shown in the help: "N", "HOST:PORT"; "" for a switch
  std::string help;   // one sentence or two; wrapped when printed
};

struct CommandSpec {
  std::string name;      // the words after `shardlab`: "run", "bench comm", "checkpoint inspect"
  std::string synopsis;  // what follows the name besides options: "JOB.json", "DIR OUT", ""
  std::string summary;   // one line for `shardlab help`
  std::vector<OptionSpec> options;
  std::string details;  // printed after the options (e.g. the --json fields); may be ""
};

// Every command, in the order `shardlab help` lists them.
const std::vector<CommandSpec>& command_table();
// The command named `name` ("bench comm"); InternalError for a name not in the table (a command's
// own code asking for itself).
const CommandSpec& command_spec(std::string_view name);
// The parser's accepted options for `name`: its value options and its switches.
ArgSpec arg_spec(std::string_view name);

// The command that the leading words of `words` name, and how many words that took: {"bench",
// "comm", "--ranks", "2"} -> ("bench comm", 2). A group word alone ("bench", "checkpoint") or an
// unknown word gives nullopt.
struct ResolvedCommand {
  const CommandSpec* spec = nullptr;
  size_t words = 0;
};
std::optional<ResolvedCommand> resolve_command(const std::vector<std::string>& words);
// Whether `words` is a group of commands ("bench", "checkpoint"): the commands whose name starts
// with it and a space.
bool is_command_group(std::string_view word);

// Whether the arguments after a command's name ask for its help: "--help" or "-h" where an option
// or a positional argument could stand (not as the value of an option that takes one).
bool wants_help(const CommandSpec& spec, const std::vector<std::string>& args);

// The help that `shardlab CMD ARGS...` asks for, or nullopt when it asks for none: `help`
// (also --help, -h) with no word, a group or a command; or --help / -h in a command's arguments
// (wants_help), or right after a group word. UsageError for `help` of an unknown command.
std::optional<std::string> help_request(const std::string& cmd,
                                        const std::vector<std::string>& args);

// `shardlab help`: the commands and their summaries.
std::string overview_help();
// `shardlab help COMMAND`: usage, summary, the options one per entry, the details.
std::string command_help(const CommandSpec& spec);
// `shardlab help bench`: the group's commands and their summaries.
std::string group_help(std::string_view group);

}  // namespace shardlab::cli
