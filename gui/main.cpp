// shardlab-gui: the desktop app. `shardlab-gui [JOB.json]`.
#include <QApplication>

#include "gui/main_window.h"

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setApplicationName("ShardLab");
  shardlab::gui::MainWindow w;
  const QStringList args = QApplication::arguments();
  if (args.size() > 1) w.openFile(args.at(1));
  w.show();
  return QApplication::exec();
}
