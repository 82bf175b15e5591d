// The packages as a user gets them: cpack builds the .deb and the .tar.gz from this build, the
// .deb's control data names its dependencies, and the binaries unpacked from each package run
// and find their resources in the package's share/shardlab (not in this source tree).
#include <QtTest>

#include <QDir>
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>

#include "tests/common/process.h"

using namespace shardlab;

namespace {

using Outcome = test::ProcessOutcome;

// The tools under the package's conditions: offscreen, and no resource directory from the build.
Outcome run(const QString& program, const QStringList& args, int timeout_ms = 600000,
            const QString& cwd = {}) {
  test::ProcessOptions o;
  o.cwd = cwd;
  o.env.insert("QT_QPA_PLATFORM", "offscreen");
  o.env.remove("SHARDLAB_RESOURCE_DIR");
  o.timeout_ms = timeout_ms;
  return test::run_process(program, args, o);
}

QString only_file(const QString& dir, const QString& pattern) {
  const QStringList found = QDir(dir).entryList({pattern}, QDir::Files);
  return found.size() == 1 ? QDir(dir).filePath(found.front()) : QString();
}

}  // namespace

class TestPackage : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir out_;

  // The binaries under `root` (an unpacked package: root/bin, root/share) run and report the
  // package's own resources folder.
  void checkUnpacked(const QString& root) {
    const QString cli = root + "/bin/shardlab";
    const QString gui = root + "/bin/shardlab-gui";
    QVERIFY2(QFile::exists(cli), qPrintable(cli));
    QVERIFY2(QFile::exists(gui), qPrintable(gui));
    Outcome v = run(cli, {"--version"}, 60000);
    QCOMPARE(v.exit_code, 0);
    QCOMPARE(v.out.trimmed(), QStringLiteral("shardlab " SHARDLAB_VERSION));
    v = run(gui, {"--version"}, 60000);
    QVERIFY2(v.exit_code == 0, qPrintable(v.err));
    QVERIFY2(v.out.contains(SHARDLAB_VERSION), qPrintable(v.out));
    // The packaged app starts (platform plugin, icon, every view), opens a packaged job and
    // draws its window.
    const QString shots = root + "/shots";
    v = run(gui,
            {root + "/share/shardlab/jobs/gpt-3d.json", "--screenshots", shots,
             "--screenshot-after", "0"},
            120000, QDir::tempPath());
    QVERIFY2(v.exit_code == 0, qPrintable(v.err));
    QFile png(shots + "/overview.png");
    QVERIFY2(png.open(QIODevice::ReadOnly), qPrintable(png.fileName()));
    QVERIFY(png.read(8) == QByteArray("\x89PNG\r\n\x1a\n", 8));

    // Run from elsewhere so the source tree's resources cannot be what it finds.
    const Outcome info = run(cli, {"info"}, 60000, QDir::tempPath());
    QCOMPARE(info.exit_code, 0);
    const QString share = QDir(root + "/share/shardlab").canonicalPath();
    QVERIFY2(info.out.contains("resources: " + share), qPrintable(info.out));
    for (const char* f : {"jobs/gpt-3d.json", "jobs/fashion_mlp.json", "corpus/fallback.txt"})
      QVERIFY2(QFile::exists(share + "/" + f), f);
    QVERIFY(QFile::exists(root + "/share/icons/hicolor/scalable/apps/shardlab.svg"));
    QFile desktop(root + "/share/applications/shardlab.desktop");
    QVERIFY(desktop.open(QIODevice::ReadOnly));
    const QString entry = QString::fromUtf8(desktop.readAll());
    QVERIFY(entry.contains("Exec=shardlab-gui"));
    QVERIFY(entry.contains("Icon=shardlab"));

    // A real (tiny) job from the packaged jobs folder trains with the packaged binary.
    const Outcome job =
        run(cli,
            {"run", share + "/jobs/gpt-3d.json", "--set", "train.steps=2", "--set",
             "train.eval_every=0", "--set", "train.log_every=1", "--no-record", "--quiet"},
            300000, QDir::tempPath());
    QVERIFY2(job.exit_code == 0, qPrintable(job.err));
  }

 private slots:
  void initTestCase() { QVERIFY(out_.isValid()); }

  void debPackage() {
    const Outcome pack =
        run("cpack",
            {"-G", "DEB", "--config", SHARDLAB_BINARY_DIR "/CPackConfig.cmake", "-B", out_.path()});
    QVERIFY2(pack.exit_code == 0, qPrintable(pack.out + pack.err));
    const QString deb = only_file(out_.path(), "shardlab_*.deb");
    QVERIFY2(!deb.isEmpty(), qPrintable(QDir(out_.path()).entryList().join(' ')));

    const Outcome control = run("dpkg-deb", {"-f", deb});
    QCOMPARE(control.exit_code, 0);
    QVERIFY(control.out.contains("Package: shardlab"));
    QVERIFY(control.out.contains("Version: " SHARDLAB_VERSION));
    // dpkg-shlibdeps found the libraries the binaries link.
    QVERIFY2(control.out.contains("libqt6widgets6"), qPrintable(control.out));
    QVERIFY2(control.out.contains("libqt6charts6"), qPrintable(control.out));
    QVERIFY2(control.out.contains("Recommends: openmpi-bin"), qPrintable(control.out));

    const QString root = out_.path() + "/deb-root";
    const Outcome x = run("dpkg-deb", {"-x", deb, root});
    QVERIFY2(x.exit_code == 0, qPrintable(x.err));
    checkUnpacked(root + "/usr");
  }

  void tarPackage() {
    const Outcome pack =
        run("cpack",
            {"-G", "TGZ", "--config", SHARDLAB_BINARY_DIR "/CPackConfig.cmake", "-B", out_.path()});
    QVERIFY2(pack.exit_code == 0, qPrintable(pack.out + pack.err));
    const QString tgz = only_file(out_.path(), "shardlab-*.tar.gz");
    QVERIFY(!tgz.isEmpty());
    const QString root = out_.path() + "/tgz-root";
    QVERIFY(QDir().mkpath(root));
    const Outcome x = run("tar", {"-xzf", tgz, "-C", root});
    QVERIFY2(x.exit_code == 0, qPrintable(x.err));
    const QString top = QFileInfo(tgz).fileName().chopped(QStringLiteral(".tar.gz").size());
    checkUnpacked(root + "/" + top);
  }
};

QTEST_GUILESS_MAIN(TestPackage)
#include "tst_package.moc"
