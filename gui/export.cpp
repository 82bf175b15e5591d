#include "gui/export.h"

#include <QCoreApplication>
#include <QImage>
#include <QPixmap>
#include <QSaveFile>
#include <QWidget>

namespace shardlab::gui {

namespace {

QString tr(const char* text) {
  return QCoreApplication::translate("shardlab::gui::Export", text);
}

bool fail(QString* error, const QString& message) {
  if (error != nullptr) *error = message;
  return false;
}

// Opens, fills (via `write`) and commits a QSaveFile; the temporary file is discarded on any
// failure.
template <class Write>
bool saveWith(const QString& path, QString* error, Write write) {
  if (path.isEmpty()) return fail(error, tr("No file name given."));
  QSaveFile file(path);
  if (!file.open(QIODevice::WriteOnly))
    return fail(error, tr("Cannot write \"%1\": %2").arg(path, file.errorString()));
  if (!write(file)) {
    file.cancelWriting();
    const QString why = file.errorString().isEmpty() ? tr("write failed") : file.errorString();
    return fail(error, tr("Cannot write \"%1\": %2").arg(path, why));
  }
  if (!file.commit())
    return fail(error, tr("Cannot write \"%1\": %2").arg(path, file.errorString()));
  return true;
}

}  // namespace

bool savePng(QWidget* widget, const QString& path, QString* error) {
  if (widget == nullptr) return fail(error, tr("Nothing to export: no view."));
  if (path.isEmpty()) return fail(error, tr("No file name given."));
  const QImage image = widget->grab().toImage();
  if (image.isNull()) return fail(error, tr("Nothing to export: the view is empty."));
  return saveWith(path, error, [&image](QSaveFile& file) { return image.save(&file, "PNG"); });
}

bool saveText(const QString& path, const QString& text, QString* error) {
  const QByteArray bytes = text.toUtf8();
  return saveWith(path, error,
                  [&bytes](QSaveFile& file) { return file.write(bytes) == bytes.size(); });
}

}  // namespace shardlab::gui
