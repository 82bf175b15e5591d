// shardlab-gui: the desktop app.
//
//   shardlab-gui [JOB.json | RUN.slrec] [--start] [--screenshots DIR [--screenshot-after S]]
//
// A job file opens in the editor (--start runs it at once); a recording opens for replay.
// --screenshots saves a PNG of every view into DIR once the run has ended or S seconds have
// passed (default 60), then quits: installer/screenshots uses it under Xvfb for the README.
#include <QApplication>
#include <QCommandLineParser>
#include <QIcon>
#include <QTimer>

#include <cstdio>
#include <cstring>

#include "engine/core/version.h"
#include "gui/main_window.h"

int main(int argc, char** argv) {
  // Answered before QApplication exists, so they work without a display.
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--version") == 0 || std::strcmp(argv[i], "-v") == 0) {
      std::printf("shardlab-gui %s\n", shardlab::version());
      return 0;
    }
  }
  QApplication app(argc, argv);
  QApplication::setApplicationName("ShardLab");
  QApplication::setApplicationVersion(shardlab::version());
  QApplication::setWindowIcon(QIcon(":/shardlab/shardlab.png"));

  QCommandLineParser parser;
  parser.setApplicationDescription(
      "ShardLab: configure, launch and watch sharded training jobs (DDP, ZeRO, FSDP, 3D).");
  parser.addHelpOption();
  parser.addPositionalArgument("file", "A job (.json) to edit or a recording (.slrec) to replay.");
  const QCommandLineOption start("start", "Start the job at once.");
  const QCommandLineOption shots("screenshots", "Save a PNG of every view into DIR, then quit.",
                                 "DIR");
  const QCommandLineOption after(
      "screenshot-after", "Take the screenshots after S seconds at most (default 60).", "S", "60");
  parser.addOptions({start, shots, after});
  if (!parser.parse(QApplication::arguments())) {
    std::fprintf(stderr, "shardlab-gui: %s (see --help)\n", qPrintable(parser.errorText()));
    return 2;
  }
  if (parser.isSet("help")) parser.showHelp(0);
  const QStringList files = parser.positionalArguments();
  if (files.size() > 1) {
    std::fprintf(stderr, "shardlab-gui: give at most one file, got %lld\n",
                 static_cast<long long>(files.size()));
    return 2;
  }
  bool ok_seconds = false;
  const double shot_after = parser.value(after).toDouble(&ok_seconds);
  if (!ok_seconds || shot_after < 0) {
    std::fprintf(stderr, "shardlab-gui: --screenshot-after needs seconds >= 0, got \"%s\"\n",
                 qPrintable(parser.value(after)));
    return 2;
  }

  shardlab::gui::MainWindow w;
  w.show();
  if (!files.isEmpty()) {
    const QString& f = files.front();
    const bool opened = f.endsWith(".slrec") ? w.openRecording(f) : w.openFile(f);
    if (!opened && parser.isSet(shots)) {
      std::fprintf(stderr, "shardlab-gui: %s\n", qPrintable(w.lastProblem()));
      return 1;
    }
  }
  if (parser.isSet(start) && !w.startRun() && parser.isSet(shots)) {
    std::fprintf(stderr, "shardlab-gui: cannot start the job\n");
    return 1;
  }
  if (parser.isSet(shots)) {
    const QString dir = parser.value(shots);
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
    QTimer::singleShot(static_cast<int>(shot_after * 1000), &w, take);
    QObject::connect(w.runController(), &shardlab::gui::RunController::finished, &w,
                     [&w, take] { QTimer::singleShot(1500, &w, take); });
  }
  return QApplication::exec();
}
