#include "tests/docs/doc_checks.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QRegularExpression>

#include <optional>
#include <string>
#include <vector>

#include "engine/cli/command_spec.h"
#include "engine/job/job_fields.h"

namespace shardlab::docs {
namespace {

// A piece of code in a document: an inline span or one logical line of a fenced block.
struct Fragment {
  int line = 0;
  QString text;
};

// Markdown's code: fenced blocks line by line (a trailing backslash joins the next line), and
// `spans` elsewhere. Link targets go to `links`.
void split_document(const QString& text, std::vector<Fragment>& code, std::vector<Fragment>& links,
                    std::vector<Fragment>& prose) {
  static const QRegularExpression span("`([^`\n]+)`");
  static const QRegularExpression link("\\]\\(([^)\\s]+)\\)");
  const QStringList lines = text.split('\n');
  bool fenced = false;
  QString pending;
  int pending_line = 0;
  for (int i = 0; i < lines.size(); ++i) {
    const QString& l = lines[i];
    if (l.trimmed().startsWith("```")) {
      fenced = !fenced;
      continue;
    }
    if (fenced) {
      if (pending.isEmpty()) pending_line = i + 1;
      if (l.endsWith('\\')) {
        pending += l.chopped(1) + ' ';
        continue;
      }
      code.push_back({pending_line, pending + l});
      pending.clear();
      continue;
    }
    prose.push_back({i + 1, l});
    for (auto m = span.globalMatch(l); m.hasNext();) code.push_back({i + 1, m.next().captured(1)});
    for (auto m = link.globalMatch(l); m.hasNext();) links.push_back({i + 1, m.next().captured(1)});
  }
}

QString where(const QString& file, int line) {
  return QString("%1:%2: ").arg(file).arg(line);
}

// `shardlab WORDS --options` in a piece of code, up to a shell separator.
void check_commands(const QString& file, const Fragment& f, QStringList& problems) {
  static const QRegularExpression command("(?:^|[\\s/(=])shardlab((?:\\s+[^\\s|;&#>]+)*)");
  static const QRegularExpression separator("\\s(?:\\||;|&&|&|#|>|2>)\\s|\\s(?:\\||&)$");
  QString text = f.text;
  for (auto m = command.globalMatch(text); m.hasNext();) {
    const QRegularExpressionMatch hit = m.next();
    QString rest = hit.captured(1);
    const QRegularExpressionMatch cut = separator.match(rest);
    if (cut.hasMatch()) rest.truncate(cut.capturedStart());
    const QStringList tokens = rest.split(QRegularExpression("\\s+"), Qt::SkipEmptyParts);
    std::vector<std::string> words;
    int i = 0;
    for (; i < tokens.size() && QRegularExpression("^[a-z][a-z-]*$").match(tokens[i]).hasMatch();
         ++i)
      words.push_back(tokens[i].toStdString());
    if (words.empty()) continue;  // `shardlab` alone, `shardlab --version`, `shardlab COMMAND`
    if (words[0] == "help") {
      const std::vector<std::string> named(words.begin() + 1, words.end());
      if (named.empty() || (named.size() == 1 && cli::is_command_group(named[0]))) continue;
      const auto c = cli::resolve_command(named);
      if (!c || c->words != named.size())
        problems << where(file, f.line) + "`shardlab " + rest.trimmed() +
                        "`: help names no command";
      continue;
    }
    const std::optional<cli::ResolvedCommand> c = cli::resolve_command(words);
    if (!c) {
      if (!cli::is_command_group(words[0]))
        problems << where(file, f.line) + "`shardlab " + QString::fromStdString(words[0]) +
                        "`: no such command";
      continue;
    }
    const cli::ArgSpec accepted = cli::arg_spec(c->spec->name);
    for (int t = static_cast<int>(c->words); t < tokens.size(); ++t) {
      QString option = tokens[t];
      if (!option.startsWith("--")) continue;
      option = option.section('=', 0, 0);
      option.remove(QRegularExpression("[.,:;)]+$"));
      if (option == "--help" || option == "--") continue;
      const std::string o = option.toStdString();
      if (!accepted.options.count(o) && !accepted.switches.count(o))
        problems << where(file, f.line) + "`shardlab " + QString::fromStdString(c->spec->name) +
                        " " + option + "`: no such option";
    }
  }
}

const QRegularExpression& repo_path() {
  static const QRegularExpression re(
      "^(?:\\.\\./)*((?:engine|gui|net|kernels|resources|tests|installer|\\.ci)/[A-Za-z0-9_./"
      "+-]*)$");
  return re;
}

QString strip_token(QString t) {
  t.remove(QRegularExpression("^[(\"'`]+"));
  t.remove(QRegularExpression("[.,;)\"'`]+$"));
  t.remove(QRegularExpression(":[0-9][0-9:-]*$"));  // file.cpp:42
  return t;
}

bool exists_in_repo(const QString& root, const QString& path) {
  return QFileInfo::exists(QDir(root).filePath(path));
}

void check_code_paths(const QString& file, const Fragment& f, const DocFacts& facts,
                      QStringList& problems) {
  for (const QString& raw : f.text.split(QRegularExpression("[\\s=,]+"), Qt::SkipEmptyParts)) {
    const QString t = strip_token(raw);
    if (t.contains(QRegularExpression("[<>*{}\\[\\]$]")) || t.contains("...")) continue;
    const QRegularExpressionMatch m = repo_path().match(t);
    if (!m.hasMatch()) continue;
    const QString p = m.captured(1);
    // A test named by its target (tests/plan/tst_plan_job) stands for its source file.
    if (!exists_in_repo(facts.repo_root, p) && !exists_in_repo(facts.repo_root, p + ".cpp") &&
        !exists_in_repo(facts.repo_root, p + ".sh"))
      problems << where(file, f.line) + p + ": no such file or folder";
  }
}

QStringList headings_of(const QString& path) {
  QFile f(path);
  QStringList anchors;
  if (!f.open(QIODevice::ReadOnly)) return anchors;
  bool fenced = false;
  for (const QString& l : QString::fromUtf8(f.readAll()).split('\n')) {
    if (l.trimmed().startsWith("```")) fenced = !fenced;
    if (!fenced && l.startsWith('#')) anchors << heading_anchor(l.section(' ', 1));
  }
  return anchors;
}

void check_link(const QString& file, const Fragment& f, const DocFacts& facts,
                QStringList& problems) {
  const QString target = f.text;
  if (target.contains("://") || target.startsWith("mailto:")) return;
  const QString path = target.section('#', 0, 0);
  const QString anchor = target.contains('#') ? target.section('#', 1) : QString();
  const QString dir = QFileInfo(QDir(facts.repo_root).filePath(file)).absolutePath();
  const QString full = path.isEmpty() ? QDir(facts.repo_root).filePath(file)
                                      : QDir::cleanPath(QDir(dir).filePath(path));
  if (!QFileInfo::exists(full)) {
    problems << where(file, f.line) + "link to " + target + ": no such file";
    return;
  }
  if (!anchor.isEmpty() && full.endsWith(".md") && !headings_of(full).contains(anchor))
    problems << where(file, f.line) + "link to " + target + ": no heading with that anchor";
}

// Dotted job fields in code: `train.steps`, `--set parallel.dp=2`.
void check_fields(const QString& file, const Fragment& f, QStringList& problems) {
  static const std::set<std::string> sections = [] {
    std::set<std::string> s;
    for (const JobField& field : job_fields()) s.insert(field.path.substr(0, field.path.find('.')));
    return s;
  }();
  static const QRegularExpression dotted("^([a-z_]+)((?:\\.[a-z_0-9]+)+)$");
  static const QRegularExpression file_name(
      "\\.(json|safetensors|slm|bin|slrec|txt|csv|md|png|py|sh|h|cpp|cu|token|log|yml|conf|gz|deb)"
      "$");
  for (const QString& raw : f.text.split(QRegularExpression("[\\s,]+"), Qt::SkipEmptyParts)) {
    const QString t = strip_token(raw.section('=', 0, 0));
    const QRegularExpressionMatch m = dotted.match(t);
    if (!m.hasMatch() || file_name.match(t).hasMatch()) continue;
    if (!sections.count(m.captured(1).toStdString())) continue;
    const std::string path = t.toStdString();
    if (find_job_field(path)) continue;
    bool section = false;
    for (const JobField& field : job_fields())
      section = section || field.path.rfind(path + ".", 0) == 0;
    if (!section) problems << where(file, f.line) + t + ": not a job field";
  }
}

void check_metrics(const QString& file, const Fragment& f, const DocFacts& facts,
                   QStringList& problems) {
  static const QRegularExpression metric("\\bshardlab_[a-z_]+\\b");
  for (auto m = metric.globalMatch(f.text); m.hasNext();) {
    const QString name = m.next().captured(0);
    if (!facts.metrics.count(name.toStdString()) && !facts.targets.count(name.toStdString()))
      problems << where(file, f.line) + name + ": /metrics serves no such metric";
  }
}

// "protocol version N", "protocol N", "version N ... HELLO", "the current version N".
void check_protocol(const QString& file, const Fragment& f, const DocFacts& facts,
                    QStringList& problems) {
  static const QRegularExpression version(
      "(?i)\\b(?:protocol(?: version)?|wire version|version)[ -](\\d+)\\b");
  const QString& l = f.text;
  const bool about_protocol =
      l.contains(QRegularExpression("(?i)protocol|HELLO|wire|frame|collector|worker"));
  if (!about_protocol) return;
  for (auto m = version.globalMatch(l); m.hasNext();) {
    const QRegularExpressionMatch hit = m.next();
    const int n = hit.captured(1).toInt();
    if (n < facts.oldest_protocol_version || n > facts.protocol_version) {
      problems
          << where(file, f.line) + hit.captured(0) + ": the protocol's versions are " +
                 QString("%1..%2").arg(facts.oldest_protocol_version).arg(facts.protocol_version);
      continue;
    }
    const QString around = l.mid(std::max<qsizetype>(0, hit.capturedStart() - 40), 80);
    if (around.contains(QRegularExpression("(?i)current|wants|must speak|speaks now")) &&
        n != facts.protocol_version)
      problems << where(file, f.line) + hit.captured(0) + ": the current version is " +
                      QString::number(facts.protocol_version);
  }
}

}  // namespace

QString heading_anchor(const QString& heading) {
  QString out;
  for (const QChar c : heading.trimmed().toLower()) {
    if (c.isLetterOrNumber() || c == '-' || c == '_')
      out += c;
    else if (c == ' ')
      out += '-';
  }
  return out;
}

QStringList check_document(const QString& file, const QString& text, const DocFacts& facts) {
  std::vector<Fragment> code, links, prose;
  split_document(text, code, links, prose);
  QStringList problems;
  for (const Fragment& f : code) {
    check_commands(file, f, problems);
    check_code_paths(file, f, facts, problems);
    check_fields(file, f, problems);
  }
  for (const Fragment& f : links) check_link(file, f, facts, problems);
  for (const Fragment& f : code) check_metrics(file, f, facts, problems);
  for (const Fragment& f : prose) check_metrics(file, f, facts, problems);
  for (const Fragment& f : prose) check_protocol(file, f, facts, problems);
  for (const Fragment& f : code) check_protocol(file, f, facts, problems);
  problems.removeDuplicates();
  return problems;
}

}  // namespace shardlab::docs
