// The colours of the run's meanings, defined once for both front ends: the desktop app (gui/)
// turns each hex string into a QColor, and the web server hands the same table to the page as the
// ES module /palette.js (net/web/web_routes.cpp), so a backward span, a params bar or a straggler
// is the same colour in the app and in the browser.
//
// One colour per meaning, each hex string distinct:
//   span    a rank's timeline: forward, backward and optimizer spans (Phase's values),
//           collectives, and idle time (also a pipeline's bubble in the planner's time split)
//   memory  the memory ledger's categories (MemCategory's values)
//   rank    a rank's flags: straggler (its peers wait for it), failed (a failed rank, or a failed
//           collective in the timeline), silent (not heard from lately)
//   group   the rings around a hovered rank's tp, dp and pp groups
//   limit   the planner's memory limits per GPU: the usable share (dashed) and the HBM
// The span and memory colours are Tableau 10's and Okabe and Ito's colour-blind-safe set; the
// views may draw lighter or darker shades of a base colour (odd model chunks, planned bars), never
// another colour for the same meaning.
//
// Plain data: no Qt, no I/O.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "engine/core/memory.h"
#include "engine/telemetry/events.h"

namespace shardlab::telemetry {

struct PaletteColour {
  std::string_view group;  // "span", "memory", "rank", "group", "limit"
  std::string_view name;   // "backward", "params", "straggler", ...
  std::string_view hex;    // "#rrggbb", lower case
};

// Every colour, by group; within "span" the first three in Phase's order, within "memory" in
// MemCategory's order (the accessors below index this table).
inline constexpr std::array<PaletteColour, 18> kPalette = {{
    {"span", "forward", "#4e79a7"},
    {"span", "backward", "#f28e2b"},
    {"span", "optimizer", "#59a14f"},
    {"span", "collective", "#b07aa1"},
    {"span", "idle", "#dedede"},
    {"memory", "params", "#0072b2"},
    {"memory", "grads", "#e69f00"},
    {"memory", "optimizer_state", "#009e73"},
    {"memory", "activations", "#cc79a7"},
    {"memory", "comm", "#56b4e9"},
    {"rank", "straggler", "#f0af00"},
    {"rank", "failed", "#d62728"},
    {"rank", "silent", "#646464"},
    {"group", "tp", "#ff6e00"},
    {"group", "dp", "#0050ff"},
    {"group", "pp", "#c800c8"},
    {"limit", "usable", "#b71c1c"},
    {"limit", "hbm", "#303030"},
}};

// The meanings that are not a Phase or a MemCategory, in kPalette's order.
enum class Meaning : uint8_t {
  collective,
  idle,
  straggler,
  failed,
  silent,
  tp_group,
  dp_group,
  pp_group,
  usable_limit,
  hbm_limit,
};

// A forward, backward or optimizer span.
constexpr std::string_view palette_colour(Phase phase) {
  return kPalette[static_cast<size_t>(phase)].hex;
}

// A memory category's bars and legend.
constexpr std::string_view palette_colour(MemCategory category) {
  return kPalette[5 + static_cast<size_t>(category)].hex;
}

constexpr const PaletteColour& palette_entry(Meaning meaning) {
  constexpr std::array<size_t, 10> kIndex = {3, 4, 10, 11, 12, 13, 14, 15, 16, 17};
  return kPalette[kIndex[static_cast<size_t>(meaning)]];
}
constexpr std::string_view palette_colour(Meaning meaning) {
  return palette_entry(meaning).hex;
}

static_assert(kPalette[static_cast<size_t>(Phase::forward)].name == "forward");
static_assert(kPalette[static_cast<size_t>(Phase::backward)].name == "backward");
static_assert(kPalette[static_cast<size_t>(Phase::optimizer)].name == "optimizer");
static_assert(kPalette[5 + static_cast<size_t>(MemCategory::params)].name == "params");
static_assert(kPalette[5 + static_cast<size_t>(MemCategory::comm)].name == "comm");
static_assert(kMemCategories == 5);
static_assert(palette_entry(Meaning::collective).name == "collective");
static_assert(palette_entry(Meaning::idle).name == "idle");
static_assert(palette_entry(Meaning::straggler).name == "straggler");
static_assert(palette_entry(Meaning::failed).name == "failed");
static_assert(palette_entry(Meaning::silent).name == "silent");
static_assert(palette_entry(Meaning::tp_group).name == "tp");
static_assert(palette_entry(Meaning::dp_group).name == "dp");
static_assert(palette_entry(Meaning::pp_group).name == "pp");
static_assert(palette_entry(Meaning::usable_limit).name == "usable");
static_assert(palette_entry(Meaning::hbm_limit).name == "hbm");

}  // namespace shardlab::telemetry
