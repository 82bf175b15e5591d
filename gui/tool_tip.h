// Tooltips that depend on where the mouse is (a heat-map cell, a timeline span, a rank's cell).
#pragma once

#include <QEvent>
#include <QPoint>
#include <QString>
#include <QWidget>

#include <functional>

namespace shardlab::gui {

// For a QEvent::ToolTip on `widget`: shows text_at(position) there, or hides the tooltip when it
// is empty, and returns true (the event is handled). Any other event: returns false.
bool showToolTip(QWidget* widget, QEvent* event, const std::function<QString(QPoint)>& text_at);

}  // namespace shardlab::gui
