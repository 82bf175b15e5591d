// What the docs (README.md and the topic pages in resources/docs/) may mention, checked against
// the code that is the source of each fact, so a renamed option, a removed file or a dropped field
// breaks the suite instead of silently leaving the docs wrong:
//   - `shardlab COMMAND --option` in code (inline spans and fenced blocks): the command and every
//     option exist in the command table (engine/cli/command_spec.h), `shardlab help WORDS` names a
//     command or a group;
//   - repository paths in code and links: the file or folder exists; a link's #anchor is a heading
//     of its target page (GitHub's slugs);
//   - job fields in code (`train.steps`, `--set parallel.dp=2`): job_fields() knows the field, or
//     it is a section that holds fields;
//   - metric names (`shardlab_...`, other than the CMake targets): /metrics serves them
//     (net/web/metrics.h);
//   - the telemetry protocol's version: a version the code decodes, and "current" only for
//     kProtocolVersion.
#pragma once

#include <QString>
#include <QStringList>

#include <set>
#include <string>

namespace shardlab::docs {

struct DocFacts {
  QString repo_root;                // where paths are looked up
  std::set<std::string> metrics;    // served metric names
  std::set<std::string> targets;    // CMake targets (shardlab_net is a library, not a metric)
  int protocol_version = 0;         // kProtocolVersion
  int oldest_protocol_version = 0;  // kOldestProtocolVersion
};

// The problems found in one document, each "FILE:LINE: what is wrong"; `file` is the path relative
// to the repository root (links resolve from its folder), `text` its content.
QStringList check_document(const QString& file, const QString& text, const DocFacts& facts);

// GitHub's anchor of a heading: lower case, punctuation other than '-' and '_' dropped, spaces as
// '-'.
QString heading_anchor(const QString& heading);

}  // namespace shardlab::docs
