// shardlab-gui: the desktop app.
//
//   shardlab-gui [JOB.json | RUN.slrec] [--start] [--screenshots DIR [--screenshot-after S]]
//
// A job file opens in the editor (--start runs it at once); a recording opens for replay.
// --help, --version and mistakes on the command line are answered without a display; with none
// (and QT_QPA_PLATFORM unset) the app says so in one line. --screenshots saves a PNG of every view
// into DIR once the run has ended or S seconds have passed (default 60), then quits:
// installer/screenshots uses it under Xvfb for the README.
#include <QApplication>
#include <QCommandLineParser>
#include <QCoreApplication>
#include <QIcon>
#include <QTimer>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "engine/core/version.h"
#include "gui/main_window.h"

namespace {

struct GuiArgs {
  QString file;
  bool start = false;
  QString screenshots;  // empty: none
  double screenshot_after = 60;
};

// The command line, read before any window system is touched: --help, --version and mistakes are
// answered without a display or Qt's platform plugin. Returns the exit status to end with, or -1
// to go on.
int parse_command_line(int argc, char** argv, GuiArgs& out) {
  QCoreApplication core(argc, argv);  // no display needed; gone before QApplication is made
  QCoreApplication::setApplicationName("shardlab-gui");
  QCoreApplication::setApplicationVersion(shardlab::version());
  QCommandLineParser parser;
  parser.setApplicationDescription(
      "ShardLab: configure, launch and watch sharded training jobs (DDP, ZeRO, FSDP, 3D).");
  const QCommandLineOption help({"h", "help"}, "Show this help.");
  const QCommandLineOption version({"v", "version"}, "Show the version.");
  parser.addPositionalArgument("file", "A job (.json) to edit or a recording (.slrec) to replay.");
  const QCommandLineOption start("start", "Start the job at once.");
  const QCommandLineOption shots("screenshots", "Save a PNG of every view into DIR, then quit.",
                                 "DIR");
  const QCommandLineOption after(
      "screenshot-after", "Take the screenshots after S seconds at most (default 60).", "S", "60");
  parser.addOptions({help, version, start, shots, after});
  if (!parser.parse(QCoreApplication::arguments())) {
    std::fprintf(stderr, "shardlab-gui: %s (see --help)\n", qPrintable(parser.errorText()));
    return 2;
  }
  if (parser.isSet(help)) {
    std::fputs(qPrintable(parser.helpText()), stdout);
    return 0;
  }
  if (parser.isSet(version)) {
    std::printf("shardlab-gui %s\n", shardlab::version());
    return 0;
  }
  const QStringList files = parser.positionalArguments();
  if (files.size() > 1) {
    std::fprintf(stderr, "shardlab-gui: give at most one file, got %lld\n",
                 static_cast<long long>(files.size()));
    return 2;
  }
  bool ok_seconds = false;
  out.screenshot_after = parser.value(after).toDouble(&ok_seconds);
  if (!ok_seconds || out.screenshot_after < 0) {
    std::fprintf(stderr, "shardlab-gui: --screenshot-after needs seconds >= 0, got \"%s\"\n",
                 qPrintable(parser.value(after)));
    return 2;
  }
  if (!files.isEmpty()) out.file = files.front();
  out.start = parser.isSet(start);
  if (parser.isSet(shots)) out.screenshots = parser.value(shots);
  return -1;
}

// Without a display Qt's platform plugin aborts with a page of text: say it in one line instead.
// QT_QPA_PLATFORM set (offscreen, vnc, eglfs...) is the user's choice and goes to Qt.
bool has_display(std::string& why) {
#if defined(__linux__)
  auto set = [](const char* name) {
    const char* v = std::getenv(name);
    return v && *v;
  };
  if (!set("QT_QPA_PLATFORM") && !set("DISPLAY") && !set("WAYLAND_DISPLAY")) {
    why =
        "no display: DISPLAY and WAYLAND_DISPLAY are unset (the shardlab command runs without "
        "one; QT_QPA_PLATFORM=offscreen runs the app without a screen)";
    return false;
  }
#endif
  (void)why;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  GuiArgs args;
  if (const int status = parse_command_line(argc, argv, args); status >= 0) return status;
  std::string why;
  if (!has_display(why)) {
    std::fprintf(stderr, "shardlab-gui: %s\n", why.c_str());
    return 1;
  }
  QApplication app(argc, argv);
  QApplication::setApplicationName("ShardLab");
  QApplication::setApplicationVersion(shardlab::version());
  QApplication::setWindowIcon(QIcon(":/shardlab/shardlab.png"));

  shardlab::gui::MainWindow w;
  w.show();
  if (!args.file.isEmpty()) {
    const QString& f = args.file;
    const bool opened = f.endsWith(".slrec") ? w.openRecording(f) : w.openFile(f);
    if (!opened && !args.screenshots.isEmpty()) {
      std::fprintf(stderr, "shardlab-gui: %s\n", qPrintable(w.lastProblem()));
      return 1;
    }
  }
  if (args.start && !w.startRun() && !args.screenshots.isEmpty()) {
    std::fprintf(stderr, "shardlab-gui: cannot start the job\n");
    return 1;
  }
  if (!args.screenshots.isEmpty()) {
    const QString dir = args.screenshots;
    int status = 0;
    bool taken = false;
    auto take = [&w, &status, &taken, dir] {
      if (taken) return;
      taken = true;
      QString error;
      if (!w.saveScreenshots(dir, &error)) {
        std::fprintf(stderr, "shardlab-gui: %s\n", qPrintable(error));
        status = 1;
      }
      QApplication::exit(status);
    };
    // Whichever comes first: the run's end (a moment later, so the views have drawn it) or S s.
    QTimer::singleShot(static_cast<int>(args.screenshot_after * 1000), &w, take);
    QObject::connect(w.runController(), &shardlab::gui::RunController::finished, &w,
                     [&w, take] { QTimer::singleShot(1500, &w, take); });
  }
  return QApplication::exec();
}
