// A temporary folder for the files a suite writes (jobs, manifests, scripts for the command under
// test), removed with the suite, and write_file() for a file anywhere. A file that cannot be
// written ends the run (qFatal): every check after it would fail for that reason alone.
#pragma once

#include <QByteArray>
#include <QFile>
#include <QString>
#include <QTemporaryDir>
#include <QtGlobal>

namespace shardlab::test {

// Writes `bytes` to `path`, replacing the file; returns `path`.
inline QString write_file(const QString& path, const QByteArray& bytes) {
  QFile f(path);
  if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate))
    qFatal("cannot write %s", qPrintable(path));
  f.write(bytes);
  return path;
}

class ScratchDir {
 public:
  QString path() const { return dir_.path(); }
  QString filePath(const QString& name) const { return dir_.filePath(name); }
  // Writes `bytes` to the file `name` in the folder; returns its path.
  QString write(const QString& name, const QByteArray& bytes) const {
    return write_file(filePath(name), bytes);
  }

 private:
  QTemporaryDir dir_;
};

}  // namespace shardlab::test
