// shardlab-gui's command line without a display: --help and --version answer with QT_QPA_PLATFORM,
// DISPLAY and WAYLAND_DISPLAY unset (so Qt's platform plugin is never loaded), a mistake on the
// command line is one line naming it with exit 2, and starting the app with no display says so in
// one line with exit 1 instead of Qt's abort.
#include <QProcess>
#include <QProcessEnvironment>
#include <QtTest>

namespace {

struct Outcome {
  int exit_code = -1;
  QString out, err;
};

Outcome run_gui(const QStringList& args) {
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  for (const char* name : {"QT_QPA_PLATFORM", "DISPLAY", "WAYLAND_DISPLAY"}) env.remove(name);
  QProcess p;
  p.setProcessEnvironment(env);
  p.start(SHARDLAB_GUI, args);
  Outcome o;
  if (!p.waitForFinished(60000)) {
    p.kill();
    p.waitForFinished(5000);
    o.err = "did not finish within 60 s";
    return o;
  }
  o.exit_code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -2;
  o.out = QString::fromUtf8(p.readAllStandardOutput());
  o.err = QString::fromUtf8(p.readAllStandardError());
  return o;
}

// One line on stderr, starting with the program's name and containing `what`; nothing on stdout.
void check_one_line(const Outcome& o, int code, const QString& what) {
  QVERIFY2(o.exit_code == code, qPrintable(QString("exit %1: %2").arg(o.exit_code).arg(o.err)));
  QVERIFY2(o.out.isEmpty(), qPrintable(o.out));
  const QStringList lines = o.err.trimmed().split('\n');
  QVERIFY2(lines.size() == 1, qPrintable(o.err));
  QVERIFY2(lines.front().startsWith("shardlab-gui: "), qPrintable(o.err));
  QVERIFY2(lines.front().contains(what), qPrintable(o.err));
}

}  // namespace

class TestGuiCommandLine : public QObject {
  Q_OBJECT
 private slots:
  void helpWithoutADisplay() {
    for (const char* flag : {"--help", "-h"}) {
      const Outcome o = run_gui({flag});
      QVERIFY2(o.exit_code == 0, qPrintable(o.err));
      QVERIFY2(o.out.contains("Usage: "), qPrintable(o.out));
      for (const char* option : {"--start", "--screenshots", "--screenshot-after", "--version"})
        QVERIFY2(o.out.contains(option), option);
      QVERIFY2(!o.err.contains("platform plugin"), qPrintable(o.err));
    }
  }

  void versionWithoutADisplay() {
    const Outcome o = run_gui({"--version"});
    QVERIFY2(o.exit_code == 0, qPrintable(o.err));
    QVERIFY2(o.out.startsWith("shardlab-gui " SHARDLAB_VERSION), qPrintable(o.out));
  }

  void mistakesAreOneLine() {
    check_one_line(run_gui({"--no-such-flag"}), 2, "no-such-flag");
    check_one_line(run_gui({"a.json", "b.json"}), 2, "at most one file");
    check_one_line(run_gui({"--screenshot-after", "soon"}), 2, "--screenshot-after");
  }

  void noDisplayIsOneLine() { check_one_line(run_gui({}), 1, "no display"); }
};

QTEST_GUILESS_MAIN(TestGuiCommandLine)
#include "tst_gui_command_line.moc"
