// installer/bootstrap builds what each command needs: `demo` the shardlab command alone (no Qt, no
// test suites, no app), `gui` the app and shardlab, `test` everything. Checked on the script itself
// (--dry-run prints the build it would run) and on the build graph: what ninja would compile for
// the shardlab target holds no Qt (no moc, no Qt include directory) and nothing of gui/ or tests/.
// A new build folder for `demo` is configured without the app and the suites, and `demo` installs
// no Qt package; `gui` and `test` turn the app and the suites back on in a folder `demo` made.
#include <QDir>
#include <QTemporaryDir>
#include <QtTest>

#include "tests/common/process.h"

using shardlab::test::ProcessOptions;
using shardlab::test::ProcessOutcome;
using shardlab::test::run_process;

namespace {

const QString kBootstrap = QStringLiteral(SHARDLAB_SOURCE_DIR "/installer/bootstrap");

ProcessOutcome bootstrap(const QStringList& args, const QString& build_dir = {}) {
  ProcessOptions o;
  o.timeout_ms = 60000;
  if (!build_dir.isEmpty()) o.env.insert("SHARDLAB_BUILD_DIR", build_dir);
  return run_process("bash", QStringList{kBootstrap} + args, o);
}

// The dry run's line that starts with `key` ("build: "), or an empty string.
QString line_of(const ProcessOutcome& r, const QString& key) {
  for (const QString& line : r.out.split('\n'))
    if (line.startsWith(key)) return line;
  return {};
}

QString build_line(const ProcessOutcome& r) {
  return line_of(r, "build: ");
}

}  // namespace

class TestBootstrap : public QObject {
  Q_OBJECT
 private slots:
  void eachCommandBuildsWhatItNeeds_data() {
    QTest::addColumn<QString>("command");
    QTest::addColumn<QString>("targets");  // after --target; empty: everything
    QTest::newRow("demo") << "demo"
                          << "shardlab";
    QTest::newRow("gui") << "gui"
                         << "shardlab-gui shardlab";
    QTest::newRow("test") << "test"
                          << "";
  }
  void eachCommandBuildsWhatItNeeds() {
    QFETCH(QString, command);
    QFETCH(QString, targets);
    const ProcessOutcome r = bootstrap({"--dry-run", command});
    QVERIFY2(r.finished && r.exit_code == 0, qPrintable(r.err));
    const QString line = build_line(r);
    QVERIFY2(line.startsWith("build: cmake --build "), qPrintable(r.out));
    if (targets.isEmpty())
      QVERIFY2(!line.contains("--target"), qPrintable(line));
    else
      QVERIFY2(line.endsWith("--target " + targets), qPrintable(line));
  }

  void demoTargetHasNoQtNorTests() {
    const QString ninja = QStandardPaths::findExecutable("ninja");
    if (ninja.isEmpty() || !QFile::exists(SHARDLAB_BINARY_DIR "/build.ninja"))
      QSKIP("the build is not a Ninja build: its graph cannot be listed here");
    ProcessOptions o;
    o.timeout_ms = 60000;
    const ProcessOutcome all = run_process(ninja, {"-C", SHARDLAB_BINARY_DIR, "-t", "commands"}, o);
    const ProcessOutcome demo =
        run_process(ninja, {"-C", SHARDLAB_BINARY_DIR, "-t", "commands", "shardlab"}, o);
    QVERIFY2(demo.finished && demo.exit_code == 0, qPrintable(demo.err));
    const QStringList commands = demo.out.split('\n', Qt::SkipEmptyParts);
    QVERIFY2(commands.size() > 50, qPrintable(QString::number(commands.size())));
    for (const QString& c : commands) {
      QVERIFY2(!c.contains("/moc") && !c.contains("QtCore") && !c.contains("Qt6"),
               qPrintable(c.left(300)));
      QVERIFY2(!c.contains("/gui/") && !c.contains("/tests/"), qPrintable(c.left(300)));
    }
    // And it is a small part of the whole build.
    const qsizetype total = all.out.split('\n', Qt::SkipEmptyParts).size();
    QVERIFY2(commands.size() * 2 < total,
             qPrintable(QString("%1 of %2 commands").arg(commands.size()).arg(total)));
  }

  void demoConfiguresWithoutQt() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString fresh = dir.path() + "/build";
    const ProcessOutcome demo = bootstrap({"--dry-run", "demo"}, fresh);
    QVERIFY2(demo.finished && demo.exit_code == 0, qPrintable(demo.err));
    const QString packages = line_of(demo, "packages: ");
    QVERIFY2(packages.contains("libopenblas-dev") && !packages.contains("qt6"),
             qPrintable(packages));
    const QString configure = line_of(demo, "configure: ");
    QVERIFY2(configure.contains("-B " + fresh) && configure.contains("-DSHARDLAB_WITH_GUI=OFF") &&
                 configure.contains("-DSHARDLAB_BUILD_TESTS=OFF"),
             qPrintable(configure));

    // gui and test want Qt, and turn on in a demo folder what demo left off.
    QVERIFY(QDir().mkpath(fresh));
    QFile cache(fresh + "/CMakeCache.txt");
    QVERIFY(cache.open(QIODevice::WriteOnly));
    cache.write(
        "SHARDLAB_WITH_GUI:BOOL=OFF\nSHARDLAB_BUILD_TESTS:BOOL=OFF\n"
        "SHARDLAB_WITH_CUDA:STRING=OFF\n");
    cache.close();
    for (const QString command : {"gui", "test"}) {
      const ProcessOutcome r = bootstrap({"--dry-run", command}, fresh);
      QVERIFY2(r.finished && r.exit_code == 0, qPrintable(r.err));
      QVERIFY2(line_of(r, "packages: ").contains("qt6-charts-dev"), qPrintable(r.out));
      const QString again = line_of(r, "configure: ");
      QVERIFY2(again.contains("-DSHARDLAB_WITH_GUI=ON") &&
                   again.contains("-DSHARDLAB_BUILD_TESTS=ON") &&
                   again.contains("-DSHARDLAB_WITH_CUDA=AUTO"),
               qPrintable(again));
    }
    // demo keeps what is there.
    const ProcessOutcome kept = bootstrap({"--dry-run", "demo"}, fresh);
    QVERIFY2(line_of(kept, "configure: ").startsWith("configure: none"), qPrintable(kept.out));
  }

  void mistakesAreRefused() {
    ProcessOutcome r = bootstrap({"--dry-run"});
    QCOMPARE(r.exit_code, 2);
    QVERIFY2(r.err.contains("usage: installer/bootstrap"), qPrintable(r.err));
    r = bootstrap({"--dry-run", "deploy"});
    QCOMPARE(r.exit_code, 2);
    QVERIFY2(r.err.contains("unknown command \"deploy\""), qPrintable(r.err));
  }
};

QTEST_GUILESS_MAIN(TestBootstrap)
#include "tst_bootstrap.moc"
