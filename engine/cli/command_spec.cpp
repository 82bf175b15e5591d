#include "engine/cli/command_spec.h"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>

#include "engine/core/error.h"

namespace shardlab::cli {

namespace {

constexpr size_t kWidth = 100;      // help lines wrap at this column
constexpr size_t kHelpColumn = 30;  // where an option's help starts

// A line break and `indent` spaces.
void new_line(std::string& out, size_t indent) {
  out += '\n';
  out.append(indent, ' ');
}

// `text` as lines of at most kWidth columns, the first starting at `first_column` (the caller has
// printed that much), the others indented to `indent`. Paragraph breaks ("\n") are kept.
std::string wrap(const std::string& text, size_t first_column, size_t indent) {
  std::string out;
  size_t column = first_column;
  bool line_start = true;
  std::istringstream paragraphs(text);
  bool first_paragraph = true;
  for (std::string paragraph; std::getline(paragraphs, paragraph);) {
    if (!first_paragraph) {
      new_line(out, indent);
      column = indent;
      line_start = true;
    }
    first_paragraph = false;
    // A paragraph's leading spaces indent all its lines (lists in the details).
    const size_t lead = std::min(paragraph.find_first_not_of(' '), paragraph.size());
    out += std::string(lead, ' ');
    column += lead;
    std::istringstream words(paragraph);
    for (std::string word; words >> word;) {
      if (!line_start && column + 1 + word.size() > kWidth) {
        new_line(out, indent + lead);
        column = indent + lead;
        line_start = true;
      }
      if (!line_start) {
        out += ' ';
        ++column;
      }
      out += word;
      column += word.size();
      line_start = false;
    }
  }
  return out;
}

std::string option_label(const OptionSpec& o) {
  return o.value.empty() ? o.name : o.name + " " + o.value;
}

// Summaries of `commands`, aligned.
std::string summaries(const std::vector<const CommandSpec*>& commands) {
  std::string out;
  for (const CommandSpec* c : commands) {
    const std::string head = "  " + c->name + (c->synopsis.empty() ? "" : " " + c->synopsis);
    if (head.size() + 2 > kHelpColumn)
      new_line(out += head, kHelpColumn);
    else
      out += head + std::string(kHelpColumn - head.size(), ' ');
    out += wrap(c->summary, kHelpColumn, kHelpColumn) + "\n";
  }
  return out;
}

}  // namespace

const CommandSpec& command_spec(std::string_view name) {
  for (const CommandSpec& c : command_table())
    if (c.name == name) return c;
  SL_THROW(InternalError, "no command '{}' in the command table", name);
}

ArgSpec arg_spec(std::string_view name) {
  ArgSpec spec;
  for (const OptionSpec& o : command_spec(name).options)
    (o.value.empty() ? spec.switches : spec.options).insert(o.name);
  return spec;
}

std::optional<ResolvedCommand> resolve_command(const std::vector<std::string>& words) {
  if (words.empty()) return std::nullopt;
  // Two words first ("bench comm"), then one ("run").
  if (words.size() >= 2)
    for (const CommandSpec& c : command_table())
      if (c.name == words[0] + " " + words[1]) return ResolvedCommand{&c, 2};
  for (const CommandSpec& c : command_table())
    if (c.name == words[0]) return ResolvedCommand{&c, 1};
  return std::nullopt;
}

bool is_command_group(std::string_view word) {
  if (word.empty()) return false;
  const std::string prefix = std::string(word) + " ";
  return std::any_of(command_table().begin(), command_table().end(),
                     [&](const CommandSpec& c) { return c.name.rfind(prefix, 0) == 0; });
}

bool wants_help(const CommandSpec& spec, const std::vector<std::string>& args) {
  const ArgSpec accepted = arg_spec(spec.name);
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") return true;
    // An option that takes a value and is not given it inline takes the next argument.
    if (accepted.options.count(a)) ++i;
  }
  return false;
}

std::optional<std::string> help_request(const std::string& cmd,
                                        const std::vector<std::string>& args) {
  auto is_help = [](const std::string& a) { return a == "--help" || a == "-h"; };
  if (cmd == "help" || is_help(cmd)) {
    if (args.empty()) return overview_help();
    if (args.size() == 1 && is_command_group(args[0])) return group_help(args[0]);
    const std::optional<ResolvedCommand> c = resolve_command(args);
    if (!c || c->words != args.size()) {
      std::string words;
      for (const std::string& a : args) words += (words.empty() ? "" : " ") + a;
      SL_THROW(UsageError, "help: unknown command '{}'", words);
    }
    return command_help(*c->spec);
  }
  std::vector<std::string> words{cmd};
  words.insert(words.end(), args.begin(), args.end());
  if (is_command_group(cmd)) {
    if (args.empty()) return std::nullopt;  // the group's own usage error
    if (is_help(args[0])) return group_help(cmd);
  }
  const std::optional<ResolvedCommand> c = resolve_command(words);
  if (!c) return std::nullopt;  // an unknown command or target: its own error
  const std::vector<std::string> rest(words.begin() + static_cast<std::ptrdiff_t>(c->words),
                                      words.end());
  if (wants_help(*c->spec, rest)) return command_help(*c->spec);
  return std::nullopt;
}

std::string overview_help() {
  std::vector<const CommandSpec*> all;
  for (const CommandSpec& c : command_table()) all.push_back(&c);
  return "usage: shardlab <command> [options]\n\ncommands:\n" + summaries(all) + "  --version" +
         std::string(kHelpColumn - 11, ' ') +
         "the version\n"
         "  help [COMMAND]" +
         std::string(kHelpColumn - 16, ' ') +
         "this text, or a command's options\n"
         "\n"
         "'shardlab help COMMAND' (or COMMAND --help) lists a command's options, e.g. shardlab "
         "help bench comm.\n"
         "Set SHARDLAB_DEBUG=1 to see where in the source an error was raised.\n";
}

std::string command_help(const CommandSpec& spec) {
  std::string out = "usage: shardlab " + spec.name;
  if (!spec.synopsis.empty()) out += " " + spec.synopsis;
  out += " [options]\n\n" + wrap(spec.summary, 0, 0) + "\n\noptions:\n";
  std::vector<OptionSpec> options = spec.options;
  options.push_back({"-h, --help", "", "show this help"});
  for (const OptionSpec& o : options) {
    const std::string head = "  " + option_label(o);
    if (head.size() + 2 > kHelpColumn)
      new_line(out += head, kHelpColumn);
    else
      out += head + std::string(kHelpColumn - head.size(), ' ');
    out += wrap(o.help, kHelpColumn, kHelpColumn) + "\n";
  }
  if (!spec.details.empty()) {
    out += '\n';
    out += wrap(spec.details, 0, 0);
    out += '\n';
  }
  return out;
}

std::string group_help(std::string_view group) {
  const std::string prefix = std::string(group) + " ";
  std::vector<const CommandSpec*> members;
  for (const CommandSpec& c : command_table())
    if (c.name.rfind(prefix, 0) == 0) members.push_back(&c);
  return fmt::format("usage: shardlab {} <{}> [options]\n\ncommands:\n{}", group,
                     group == "bench" ? "target" : "action", summaries(members)) +
         fmt::format("\n'shardlab help {} NAME' lists one's options.\n", group);
}

}  // namespace shardlab::cli
