// Export: saving what a view shows. The main window's File > Export offers the current view as a
// PNG (savePng) and its series as CSV (saveText with the view's csv()).
//
// Both write through QSaveFile: the data goes to a temporary file beside the target, which
// replaces the target only when everything was written, so a failure (full disk, unwritable
// folder) never leaves a half-written file behind, and an existing file stays as it was.
// Errors come back as one readable sentence naming the path (for a message box), never as
// exceptions.
#pragma once

#include <QString>

QT_BEGIN_NAMESPACE
class QWidget;
QT_END_NAMESPACE

namespace shardlab::gui {

// Renders `widget` as it looks now (QWidget::grab(): its size times the device pixel ratio) and
// saves it as a PNG at `path`. False, with *error set when `error` is not null, for a null
// widget, an empty path, or a file that cannot be written.
bool savePng(QWidget* widget, const QString& path, QString* error = nullptr);

// Writes `text` as UTF-8 to `path`. False, with *error set, for an empty path or a file that
// cannot be written.
bool saveText(const QString& path, const QString& text, QString* error = nullptr);

}  // namespace shardlab::gui
