// The layering of the code, kept by a test: every #include "..." in engine/, net/, kernels/ and
// gui/ goes only where the table "Who may include whom" of resources/docs/layout.md allows (the
// graph is written once, on the page a reader sees), only gui/ includes Qt and only net/ includes
// Asio or Beast (only net/ talks to sockets). The checker is
// shown to fail on planted bad includes. No comment cites an issue number or a document that is
// not in the repository.
#include <QDir>
#include <QDirIterator>
#include <QFile>
#include <QRegularExpression>
#include <QtTest>

#include <map>
#include <set>

namespace {

QString root() {
  return QStringLiteral(SHARDLAB_SOURCE_DIR);
}

using Rules = std::map<QString, std::set<QString>>;  // room -> rooms it may include

// The table under "## Who may include whom": | `room` | `a`, `b` | (— for none).
Rules read_rules(const QString& page) {
  Rules rules;
  bool in_section = false;
  static const QRegularExpression row("^\\|\\s*`([^`]+)`\\s*\\|(.*)\\|\\s*$");
  static const QRegularExpression code("`([^`]+)`");
  for (const QString& line : page.split('\n')) {
    if (line.startsWith("## ")) in_section = line.contains("Who may include whom");
    if (!in_section) continue;
    const QRegularExpressionMatch m = row.match(line);
    if (!m.hasMatch()) continue;
    std::set<QString>& allowed = rules[m.captured(1)];
    for (auto it = code.globalMatch(m.captured(2)); it.hasNext();)
      allowed.insert(it.next().captured(1));
  }
  return rules;
}

// The longest room that holds `path`'s folder, or "" when none does.
QString room_of(const Rules& rules, const QString& path) {
  QString best;
  for (const auto& [room, _] : rules)
    if (path.startsWith(room + "/") && room.size() > best.size()) best = room;
  return best;
}

// "FILE: includes TARGET (room A may not include room B)" for each include out of line.
QStringList check_file(const Rules& rules, const QString& path, const QString& text) {
  QStringList problems;
  const QString from = room_of(rules, path);
  if (from.isEmpty()) return {path + ": in no room of the table"};
  static const QRegularExpression quoted("^\\s*#\\s*include\\s+\"([^\"]+)\"",
                                         QRegularExpression::MultilineOption);
  static const QRegularExpression qt("^\\s*#\\s*include\\s+<(Q[A-Za-z]+|Qt[A-Za-z]+/[^>]+)>",
                                     QRegularExpression::MultilineOption);
  for (auto it = quoted.globalMatch(text); it.hasNext();) {
    const QString target = it.next().captured(1);
    const QString to = room_of(rules, target);
    if (to.isEmpty() || to == from) continue;  // a local header ("bf16.h"), or its own room
    if (!rules.at(from).count(to))
      problems << QString("%1: includes %2 (%3 may not include %4)").arg(path, target, from, to);
  }
  if (from != "gui")
    for (auto it = qt.globalMatch(text); it.hasNext();)
      problems << QString("%1: includes <%2> (only gui/ uses Qt)").arg(path, it.next().captured(1));
  static const QRegularExpression sockets("^\\s*#\\s*include\\s+<(boost/(?:asio|beast)[^>]*)>",
                                          QRegularExpression::MultilineOption);
  if (from != "net" && !from.startsWith("net/"))
    for (auto it = sockets.globalMatch(text); it.hasNext();)
      problems << QString("%1: includes <%2> (only net/ talks to sockets)")
                      .arg(path, it.next().captured(1));
  return problems;
}

Rules rules() {
  QFile page(root() + "/resources/docs/layout.md");
  if (!page.open(QIODevice::ReadOnly)) return {};
  return read_rules(QString::fromUtf8(page.readAll()));
}

}  // namespace

class TestLayering : public QObject {
  Q_OBJECT
 private slots:
  void tableIsRead() {
    const Rules r = rules();
    QVERIFY2(r.size() >= 20, qPrintable(QString::number(r.size())));
    QVERIFY(r.at("engine/core").empty());
    QVERIFY(r.at("net").count("engine/telemetry"));
    QVERIFY(!r.at("net").count("engine/run"));
    QVERIFY(!r.at("engine/strategies").count("engine/hybrid"));
  }

  void everyIncludeKeepsTheLayers() {
    const Rules r = rules();
    QStringList problems;
    int files = 0;
    for (const char* top : {"engine", "net", "kernels", "gui"}) {
      QDirIterator it(root() + "/" + top, {"*.h", "*.cpp", "*.cu", "*.cuh"}, QDir::Files,
                      QDirIterator::Subdirectories);
      while (it.hasNext()) {
        const QString full = it.next();
        QFile f(full);
        QVERIFY(f.open(QIODevice::ReadOnly));
        problems << check_file(r, QDir(root()).relativeFilePath(full),
                               QString::fromUtf8(f.readAll()));
        ++files;
      }
    }
    QVERIFY2(files > 300, qPrintable(QString::number(files)));
    QVERIFY2(problems.isEmpty(), qPrintable(problems.join('\n')));
  }

  // Planted bad includes fail: the engine's core reaching up into net/, the collector into the
  // memory planner, the 1-D strategies into 3D, a kernel into the engine, Qt outside gui/.
  void plantedBadIncludesFail_data() {
    QTest::addColumn<QString>("path");
    QTest::addColumn<QString>("text");
    QTest::addColumn<QString>("expected");
    QTest::newRow("core -> net") << "engine/core/tensor.h"
                                 << "#include \"net/collector.h\"\n"
                                 << "engine/core may not include net";
    QTest::newRow("net -> memory planner") << "net/collector.cpp"
                                           << "#include \"engine/plan/memory/planner.h\"\n"
                                           << "net may not include engine/plan/memory";
    QTest::newRow("1-D strategies -> 3D") << "engine/strategies/zero.cpp"
                                          << "#include \"engine/hybrid/hybrid_optimizer.h\"\n"
                                          << "engine/strategies may not include engine/hybrid";
    QTest::newRow("kernel -> engine") << "kernels/cpu/gemm.cpp"
                                      << "  #  include \"engine/core/error.h\"\n"
                                      << "kernels/cpu may not include engine/core";
    QTest::newRow("qt in the engine") << "engine/job/job_spec.cpp"
                                      << "#include <QString>\n"
                                      << "only gui/ uses Qt";
    QTest::newRow("asio in the engine") << "engine/bench/telemetry_bench.cpp"
                                        << "#include <boost/asio/ip/tcp.hpp>\n"
                                        << "only net/ talks to sockets";
  }
  void plantedBadIncludesFail() {
    QFETCH(QString, path);
    QFETCH(QString, text);
    QFETCH(QString, expected);
    const QStringList problems = check_file(rules(), path, text);
    QVERIFY2(problems.join('\n').contains(expected), qPrintable(problems.join('\n')));
  }

  // Comments that rot: an issue number means nothing to a later reader, and a document outside
  // the repository cannot be followed.
  void noCommentCitesAnIssueOrAMissingDocument() {
    static const QRegularExpression rot(
        "(?i:\\bissues? #?[0-9]+\\b)|\\bDESIGN\\.md\\b|\\bREFERENCE\\.md\\b|\\.\\./shared/");
    QStringList problems;
    for (const char* top :
         {"engine", "net", "kernels", "gui", "tests", "installer", "resources/web"}) {
      QDirIterator it(root() + "/" + top,
                      {"*.h", "*.cpp", "*.cu", "*.cuh", "*.txt", "*.cmake", "*.py", "*.sh", "*.js",
                       "*.html", "bootstrap", "screenshots"},
                      QDir::Files, QDirIterator::Subdirectories);
      while (it.hasNext()) {
        const QString full = it.next();
        if (full.endsWith("tests/docs/tst_layering.cpp")) continue;  // this rule's own text
        QFile f(full);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const QStringList lines = QString::fromUtf8(f.readAll()).split('\n');
        for (int i = 0; i < lines.size(); ++i)
          if (rot.match(lines[i]).hasMatch())
            problems << QString("%1:%2: %3")
                            .arg(QDir(root()).relativeFilePath(full))
                            .arg(i + 1)
                            .arg(lines[i].trimmed());
      }
    }
    QVERIFY2(problems.isEmpty(), qPrintable(problems.join('\n')));
  }

  void allowedIncludesPass() {
    const QStringList problems = check_file(
        rules(), "engine/tensor_parallel/tp_group.cpp",
        "#include \"engine/tensor_parallel/tp_group.h\"\n#include \"engine/comm/communicator.h\"\n"
        "#include \"kernels/cpu/gemm.h\"\n#include <vector>\n");
    QVERIFY2(problems.isEmpty(), qPrintable(problems.join('\n')));
  }
};

QTEST_GUILESS_MAIN(TestLayering)
#include "tst_layering.moc"
