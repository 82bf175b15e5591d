#include "gui/tool_tip.h"

#include <QHelpEvent>
#include <QToolTip>

namespace shardlab::gui {

bool showToolTip(QWidget* widget, QEvent* event, const std::function<QString(QPoint)>& text_at) {
  if (event->type() != QEvent::ToolTip) return false;
  const auto* help = static_cast<QHelpEvent*>(event);
  const QString text = text_at(help->pos());
  if (text.isEmpty()) {
    QToolTip::hideText();
    event->ignore();
  } else {
    QToolTip::showText(help->globalPos(), text, widget);
  }
  return true;
}

}  // namespace shardlab::gui
