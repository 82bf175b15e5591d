// The app's colours of the run's meanings, from the one table both front ends read
// (engine/telemetry/palette.h): a span kind, a memory category, a rank's flag, a group ring, a
// planner limit.
#pragma once

#include <QAnyStringView>
#include <QColor>

#include <string_view>

#include "engine/telemetry/palette.h"

namespace shardlab::gui {

// The QColor of a palette hex string ("#f28e2b").
inline QColor paletteColor(std::string_view hex) {
  return QColor::fromString(QAnyStringView(QLatin1StringView(hex.data(), hex.size())));
}

inline QColor paletteColor(telemetry::Phase phase) {
  return paletteColor(telemetry::palette_colour(phase));
}
inline QColor paletteColor(MemCategory category) {
  return paletteColor(telemetry::palette_colour(category));
}
inline QColor paletteColor(telemetry::Meaning meaning) {
  return paletteColor(telemetry::palette_colour(meaning));
}

}  // namespace shardlab::gui
