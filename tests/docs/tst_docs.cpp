// The docs cannot drift from the code: README.md and every topic page in resources/docs/ are read
// and each command, option, path, link, job field, metric and protocol version they mention is
// looked up where the code keeps it (doc_checks.h). The checker is shown to fail on a renamed
// option, a removed file and the other mistakes, on the real README altered and on small texts.
// The README stays a front page: at most 25,000 bytes, linking every topic page, each of which
// says what it covers in its first line.
#include <QDir>
#include <QDirIterator>
#include <QFile>
#include <QRegularExpression>
#include <QtTest>

#include "net/protocol.h"
#include "net/run_model.h"
#include "net/web/metrics.h"
#include "tests/docs/doc_checks.h"

using shardlab::docs::check_document;
using shardlab::docs::DocFacts;

namespace {

QString root() {
  return QStringLiteral(SHARDLAB_SOURCE_DIR);
}

QString read(const QString& relative) {
  QFile f(QDir(root()).filePath(relative));
  if (!f.open(QIODevice::ReadOnly)) return {};
  return QString::fromUtf8(f.readAll());
}

QStringList topic_pages() {
  QStringList pages;
  for (const QString& name : QDir(root() + "/resources/docs").entryList({"*.md"}, QDir::Files))
    pages << "resources/docs/" + name;
  return pages;
}

DocFacts facts() {
  DocFacts f;
  f.repo_root = root();
  f.protocol_version = shardlab::net::kProtocolVersion;
  f.oldest_protocol_version = shardlab::net::kOldestProtocolVersion;
  // The served names, from the exposition itself: every metric has its "# TYPE name type" line
  // even before a rank has connected.
  shardlab::net::RunModel model;
  const std::string text = shardlab::net::prometheus_metrics({model, "docs", 0, 0});
  for (const QString& line : QString::fromStdString(text).split('\n'))
    if (line.startsWith("# TYPE ")) f.metrics.insert(line.section(' ', 2, 2).toStdString());
  // The CMake targets, from every CMakeLists.txt of the repository.
  static const QRegularExpression target("add_(?:library|executable)\\(\\s*(\\w+)");
  QDirIterator it(root(), {"CMakeLists.txt"}, QDir::Files, QDirIterator::Subdirectories);
  while (it.hasNext()) {
    const QString path = it.next();
    if (path.startsWith(root() + "/build")) continue;
    QFile cmake(path);
    if (!cmake.open(QIODevice::ReadOnly)) continue;
    for (auto m = target.globalMatch(QString::fromUtf8(cmake.readAll())); m.hasNext();)
      f.targets.insert(m.next().captured(1).toStdString());
  }
  return f;
}

QString joined(const QStringList& problems) {
  return problems.join('\n');
}

}  // namespace

class TestDocs : public QObject {
  Q_OBJECT
 private slots:
  void factsAreRead() {
    const DocFacts f = facts();
    QVERIFY(f.metrics.count("shardlab_step"));
    QVERIFY(f.metrics.count("shardlab_memory_bytes"));
    QVERIFY(f.targets.count("shardlab_net") && f.targets.count("shardlab"));
    QVERIFY(f.protocol_version >= 3);
    QVERIFY(topic_pages().size() >= 10);
  }

  void everyPageIsTrue_data() {
    QTest::addColumn<QString>("file");
    QTest::newRow("README.md") << QString("README.md");
    for (const QString& page : topic_pages()) QTest::newRow(qPrintable(page)) << page;
  }
  void everyPageIsTrue() {
    QFETCH(QString, file);
    const QString text = read(file);
    QVERIFY2(!text.isEmpty(), qPrintable(file));
    const QStringList problems = check_document(file, text, facts());
    QVERIFY2(problems.isEmpty(), qPrintable(joined(problems)));
  }

  void readmeIsAFrontPage() {
    QFile f(root() + "/README.md");
    QVERIFY(f.open(QIODevice::ReadOnly));
    const QByteArray bytes = f.readAll();
    QVERIFY2(bytes.size() <= 25000, qPrintable(QString::number(bytes.size())));
    const QString text = QString::fromUtf8(bytes);
    QVERIFY(text.contains("installer/bootstrap demo"));
    QVERIFY(text.contains("installer/bootstrap test"));
    QVERIFY(text.indexOf("installer/bootstrap demo") < 500);  // the README starts with them
    const QString index = read("resources/docs/README.md");
    for (const QString& page : topic_pages()) {
      const QString name = page.section('/', -1);
      if (name != "README.md") {
        QVERIFY2(text.contains("resources/docs/" + name), qPrintable(page + " not linked"));
        QVERIFY2(index.contains("(" + name + ")"), qPrintable(page + " not in the index"));
      }
      // The first line says what the page covers: a sentence, not a heading.
      const QString first = read(page).section('\n', 0, 0);
      QVERIFY2(!first.startsWith('#') && first.endsWith('.') && first.size() > 30,
               qPrintable(page + ": " + first));
    }
  }

  // The CPU figures come from one script: the page carries its header line (date, machine, BLAS
  // kernel, build) and a section for each of the script's sections.
  void measurementsComeFromTheScript() {
    const QString page = read("resources/docs/measurements.md");
    const QString script = read("tests/bench/figures.py");
    static const QRegularExpression header(
        "^Measured \\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d UTC on .+; OpenBLAS kernel \\S+; .+; "
        "shardlab \\S+ at commit \\w+; by tests/bench/figures\\.py\\.$",
        QRegularExpression::MultilineOption);
    QVERIFY2(header.match(page).hasMatch(), "no header line printed by tests/bench/figures.py");
    for (const char* section :
         {"optimizer", "training", "comm", "mpi", "sharded", "hybrid", "telemetry", "web"}) {
      QVERIFY2(page.contains(QString("\n### %1\n").arg(section)), section);
      QVERIFY2(script.contains(QString("\ndef %1(").arg(section)), section);
    }
  }

  // tests/CMakeLists.txt's comment lists every shared test helper in tests/common, so a newcomer
  // finds them there: a helper added without its line fails here.
  void everyTestHelperIsListed() {
    const QString cmake = read("tests/CMakeLists.txt");
    const QStringList helpers =
        QDir(QStringLiteral(SHARDLAB_SOURCE_DIR "/tests/common")).entryList({"*.h"}, QDir::Files);
    QVERIFY2(helpers.size() >= 9, qPrintable(helpers.join(' ')));
    for (const QString& h : helpers)
      QVERIFY2(cmake.contains(QRegularExpression("\\n#   " + QRegularExpression::escape(h) + " ")),
               qPrintable(h + " is not listed in tests/CMakeLists.txt"));
  }

  // The checker fails where it must: the real README with an option renamed and a file removed
  // from what it names, and each kind of mistake on its own.
  void renamedOptionFails() {
    QString text = read("README.md");
    QVERIFY(text.contains("--verify"));
    QVERIFY(check_document("README.md", text, facts()).isEmpty());
    text.replace("--verify", "--verify-all");
    const QStringList problems = check_document("README.md", text, facts());
    QVERIFY2(joined(problems).contains("--verify-all`: no such option"),
             qPrintable(joined(problems)));
  }
  void removedFileFails() {
    QString text = read("README.md");
    QVERIFY(text.contains("engine/launch/"));
    text.replace("engine/launch/", "engine/launcher/");
    const QStringList problems = check_document("README.md", text, facts());
    QVERIFY2(joined(problems).contains("engine/launcher/: no such file"),
             qPrintable(joined(problems)));
  }
  void eachMistakeIsFound_data() {
    QTest::addColumn<QString>("text");
    QTest::addColumn<QString>("expected");
    QTest::newRow("command") << "Run `shardlab train job.json`."
                             << "no such command";
    QTest::newRow("option in a block")
        << "```sh\nshardlab plan --model gpt3-175b \\\n    --gpus 8 --gpu-count 8\n```"
        << "`shardlab plan --gpu-count`: no such option";
    QTest::newRow("help") << "`shardlab help bench gpu`"
                          << "help names no command";
    QTest::newRow("path") << "See `net/web/nothing.cpp`."
                          << "net/web/nothing.cpp: no such file";
    QTest::newRow("link") << "[x](resources/docs/none.md)"
                          << "no such file";
    QTest::newRow("anchor") << "[x](README.md#no-such-heading)"
                            << "no heading with that anchor";
    QTest::newRow("field") << "`--set train.stepz=5`"
                           << "train.stepz: not a job field";
    QTest::newRow("metric") << "graph `shardlab_tokens_total`"
                            << "serves no such metric";
    QTest::newRow("protocol") << "the collector wants protocol version 2 in HELLO"
                              << "the current version is";
    QTest::newRow("future protocol") << "wire version 9 frames"
                                     << "the protocol's versions";
  }
  void eachMistakeIsFound() {
    QFETCH(QString, text);
    QFETCH(QString, expected);
    const QStringList problems = check_document("README.md", text, facts());
    QVERIFY2(joined(problems).contains(expected), qPrintable(joined(problems)));
  }
  void rightMentionsPass() {
    const QString text =
        "```sh\nmpirun -np 4 build/engine/cli/shardlab worker resources/jobs/fashion_mlp.json "
        "--set parallel.backend=mpi --telemetry 127.0.0.1:7070 | tee log\n```\n"
        "`shardlab help bench comm`, `shardlab bench` alone, `train.schedule`, `model.gpt.width`, "
        "`model.safetensors`, [jobs](resources/docs/jobs.md), `shardlab_rank_up`, protocol "
        "version 1 frames still decode.";
    const QStringList problems = check_document("README.md", text, facts());
    QVERIFY2(problems.isEmpty(), qPrintable(joined(problems)));
  }
};

QTEST_GUILESS_MAIN(TestDocs)
#include "tst_docs.moc"
