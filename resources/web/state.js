// ShardLab dashboard, the state: window.shardlab (the page's public hook), the one merged state that
// the server's "full" and "delta" frames (wire format version 1, README.md) are applied to, the
// marks of what changed since the last render, and render scheduling: at most once per animation
// frame, the render itself being dashboard.js's (setRenderer). Every view reads S.state and ui.
import { isNum } from './draw.js';

// ---- Shared state -------------------------------------------------------------------------------
// window.shardlab: frames = renders done, frameTimes = their durations in ms (last 200),
// lastFrame = the `frame` counter of the newest frame applied, received = frames applied;
// memory = what the memory chart last drew ({modelStatesOnly, chosen: by the user, top: bytes at
// the axis's top, tallest: bytes of the tallest drawn bar}, charts.js), gridText = the lines each
// grid cell shows, by rank (empty when the cells hold no text; rank_grid.js), holdings = what the
// "Who holds what" panel drew (holdings.js: each rank's lanes, their held index ranges and those
// ranges in canvas CSS pixels, the axis, and the step scrubber's highlights), step = the scrubber's
// frame ({index, title, live, step, frames}; step_replay.js).
const S = window.shardlab = {
  frames: 0, frameTimes: [], lastFrame: null, state: emptyState(), connected: false,
  received: 0, apply: applyFrame, renderNow, memory: null, gridText: [], holdings: null, step: null,
};
// The page's own state: what to redraw, the mouse, the controls' choices, the views' last layouts.
const ui = {
  dirty: new Set(), raf: 0, hover: -1, mouse: null, tipFor: null, gridColour: 'state', heatMetric: null,
  sliderDragging: false, grid: null, heat: null, tl: null, heatCanvas: null,
};
let renderer = () => {};

function emptyState() {
  return { frame: 0, now: 0, job: null, replay: null, ranks: [], diagnosis: { straggler: -1, lines: [], busy: [] },
    loss: [], evals: [], heat: { first: 0, last: 0, cols: [] }, comm: [], timeline: null, layout: null,
    teaching: null, step: null };
}

// ---- Applying frames ----------------------------------------------------------------------------
function mark(...what) { for (const w of what) ui.dirty.add(w); }
function markAll() {
  mark('header', 'diagnosis', 'replay', 'grid', 'loss', 'memory', 'heat', 'table', 'timeline', 'holdings', 'tip',
    'teaching');
}

// Applies one frame exactly as it came from the socket, then schedules a redraw (coalesced).
function applyFrame(f) {
  if (!f || typeof f !== 'object') return;
  const full = f.type === 'full';
  if (full) { S.state = emptyState(); markAll(); }
  const st = S.state;
  if (isNum(f.frame)) { st.frame = f.frame; S.lastFrame = f.frame; }
  if (isNum(f.now)) { st.now = f.now; mark('tip'); }
  if (f.job) {
    const oldWorld = st.job ? st.job.world : -1;
    st.job = f.job;
    if (f.job.world !== oldWorld) resizeRanks(st);
    mark('header', 'replay', 'grid', 'memory', 'heat', 'holdings');
  }
  if (f.replay) { st.replay = f.replay; mark('replay'); }
  if (f.ranks) { mergeRanks(st, f.ranks); mark('grid', 'memory', 'holdings', 'tip'); }
  if (f.diagnosis) { st.diagnosis = f.diagnosis; mark('diagnosis', 'grid', 'heat', 'timeline'); }
  if (f.loss) { appendSeries(st.loss, f.loss); mark('loss'); }
  if (f.evals) { appendSeries(st.evals, f.evals); mark('loss'); }
  if (f.heat) { mergeHeat(st, f.heat, full); mark('heat'); }
  if (Array.isArray(f.comm)) { st.comm = f.comm; mark('table'); }
  if (f.timeline) { st.timeline = f.timeline; mark('timeline'); }
  // Who holds what: the whole section whenever it changed (null: no rank sent a LAYOUT).
  if (f.layout !== undefined) { st.layout = f.layout; mark('holdings'); }
  // One step phase by phase (net/web/step_json.h): the holdings panel's scrubber (step_replay.js).
  if (f.step !== undefined) { st.step = f.step; mark('holdings'); }
  if ('teaching' in f) { st.teaching = f.teaching; mark('teaching'); }
  S.received++;
  scheduleRender();
}

function resizeRanks(st) {
  const n = Math.max(0, st.job.world | 0);
  if (st.ranks.length > n) st.ranks.length = n;
  while (st.ranks.length < n) st.ranks.push(null);
  if (ui.hover >= n) ui.hover = -1;
}

// Full: an array indexed by rank (null = not heard from yet); delta: {"5": row, ...}.
function mergeRanks(st, ranks) {
  if (Array.isArray(ranks)) {
    st.ranks = ranks.slice();
    if (st.job) resizeRanks(st);
    return;
  }
  for (const k of Object.keys(ranks)) {
    const r = Number(k);
    if (Number.isInteger(r) && r >= 0) st.ranks[r] = ranks[k];
  }
  for (let i = 0; i < st.ranks.length; i++) if (st.ranks[i] === undefined) st.ranks[i] = null;
}

// Append-only series: the frame's points start at index `from` (a resend from earlier replaces).
function appendSeries(series, part) {
  const from = isNum(part.from) ? part.from : series.length;
  if (from < series.length) series.length = from;
  for (const p of Array.isArray(part.points) ? part.points : []) series.push(p);
}

// Heat columns by step: a column replaces the held one of its step; steps outside [first, last]
// are dropped (below first: the window moved on; above last: a replay seeked backwards).
function mergeHeat(st, h, full) {
  const byStep = new Map();
  if (!full) for (const c of st.heat.cols) byStep.set(c[0], c);
  for (const c of h.cols || []) if (Array.isArray(c)) byStep.set(c[0], c);
  const first = isNum(h.first) ? h.first : st.heat.first;
  const last = isNum(h.last) ? h.last : st.heat.last;
  const cols = [...byStep.values()].filter((c) => c[0] >= first && c[0] <= last).sort((a, b) => a[0] - b[0]);
  st.heat = { first, last, cols };
}

// ---- Render scheduling --------------------------------------------------------------------------
// The function that redraws what ui.dirty names (dashboard.js's render).
function setRenderer(fn) { renderer = fn; }

function scheduleRender() { if (!ui.raf) ui.raf = requestAnimationFrame(() => { ui.raf = 0; renderer(); }); }

// Renders at once (tests and benchmarks), instead of at the next animation frame.
function renderNow() { if (ui.raf) cancelAnimationFrame(ui.raf); ui.raf = 0; renderer(); }

// ---- Ranks --------------------------------------------------------------------------------------
const hasFlag = (row, f) => Array.isArray(row.flags) && row.flags.includes(f);
const isFailed = (row) => !!row && (row.state === 'failed' || hasFlag(row, 'FAILED'));
function stragglerRank() {
  const d = S.state.diagnosis;
  if (d && isNum(d.straggler) && d.straggler >= 0) return d.straggler;
  return S.state.ranks.findIndex((r) => r && hasFlag(r, 'STRAGGLER'));
}

export {
  S, ui, mark, markAll, applyFrame, setRenderer, scheduleRender, renderNow, hasFlag, isFailed, stragglerRank,
};
