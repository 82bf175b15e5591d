// ShardLab live dashboard, the page's entry module (index.html loads it alone; it imports the rest):
// applies the server's "full" and "delta" frames (wire format version 1, README.md) to one merged
// state and redraws what changed, at most once per animation frame, on <canvas>. No libraries, no
// build step; every string from the server goes in through textContent.
// This file: the render of every section, the header, diagnosis and replay bar, and start-up. The
// modules: palette.js (the colours, made by the server from the table the desktop app reads too),
// draw.js (helpers), state.js (window.shardlab, applying frames, render scheduling), socket.js (the
// WebSocket), the views rank_grid.js, charts.js (loss, memory) and comm_views.js (heat map, table,
// timeline), controls.js (mouse, buttons, tooltips) and teaching.js (a teaching run's bar).
import { $, isNum, fmtInt, fmtPct, el, widths, applyPalette } from './draw.js';
import { S, ui, markAll, setRenderer, renderNow, isFailed, stragglerRank } from './state.js';
import { setConnected, connect } from './socket.js';
import { renderGrid, STATE_FILL } from './rank_grid.js';
import { renderLoss, renderMemory } from './charts.js';
import { renderHeat, renderTable, renderTimeline } from './comm_views.js';
import { refreshTip, showReplayPosition, wireControls } from './controls.js';
import { renderTeaching, wireTeaching } from './teaching.js';
import { renderHoldings, wireHoldings } from './holdings.js';

const CANVASES = ['rank-grid', 'loss-chart', 'memory-chart', 'heat-map', 'timeline', 'holdings'];
const NOBODY = 'nobody holds the others back';

// ---- Rendering ----------------------------------------------------------------------------------
// Redraws what changed since the last render and records how long that took.
function render() {
  const t0 = performance.now();
  const d = ui.dirty;
  ui.dirty = new Set();
  // Every width is read before anything is written, so the layout is computed once.
  for (const id of CANVASES) widths.set(id, Math.max(60, $(id).parentElement.clientWidth));
  const sections = [
    ['header', renderHeader], ['diagnosis', renderDiagnosis], ['replay', renderReplay],
    ['grid', renderGrid], ['loss', renderLoss], ['memory', renderMemory], ['heat', renderHeat],
    ['table', renderTable], ['timeline', renderTimeline], ['holdings', renderHoldings], ['tip', refreshTip],
    ['teaching', renderTeaching],
  ];
  for (const [name, fn] of sections) if (d.has(name)) fn();
  updateDataAttributes();
  S.frames++;
  S.frameTimes.push(performance.now() - t0);
  if (S.frameTimes.length > 200) S.frameTimes.shift();
}

// The counts tests and readers check, written on every render.
function updateDataAttributes() {
  const st = S.state;
  const set = (id, key, v) => { $(id).dataset[key] = String(v); };
  set('rank-grid', 'cells', ui.grid ? ui.grid.n : 0);
  set('rank-grid', 'straggler', stragglerRank());
  set('rank-grid', 'failed', st.ranks.reduce((a, r, i) => (isFailed(r) ? a.concat(i) : a), []).join(','));
  set('loss-chart', 'points', st.loss.length);
  set('memory-chart', 'ranks', st.ranks.filter((r) => r && Array.isArray(r.mem)).length);
  set('heat-map', 'rows', ui.heat ? ui.heat.n : 0);
  set('heat-map', 'cols', st.heat.cols.length);
  set('heat-map', 'drawnRows', ui.heat ? ui.heat.rows : 0);
  set('timeline', 'lanes', st.timeline && Array.isArray(st.timeline.lanes) ? st.timeline.lanes.length : 0);
}

// ---- Header, diagnosis, replay bar --------------------------------------------------------------
function renderHeader() {
  const job = S.state.job;
  if (!job) return;
  $('job-name').textContent = job.name || job.id || 'job';
  $('job-name').title = job.id || '';
  const state = String(job.state || 'waiting');
  $('job-state').textContent = state;
  $('job-state').className = `badge state-${/^[a-z]+$/.test(state) ? state : 'waiting'}`;
  $('job-step').textContent = String(isNum(job.step) ? job.step : 0);
  const layout = `pp ${job.pp} × tp ${job.tp} × dp ${job.dp}`;
  $('job-layout').textContent = `${fmtInt(job.world)} ranks = ${layout} · ${job.mode === 'replay' ? 'replay' : 'live'}`;
  $('job-events').textContent = `${fmtInt(job.events)} events`;
  $('ranks-sub').textContent = layout;
  document.title = `${job.name || 'job'} · ${state} — ShardLab`;
  $('grid-note').textContent = (job.world > 64
    ? `${fmtInt(job.world)} ranks: small cells without numbers; hover one for its figures and groups. ` : '') +
    'Bands are pipeline stages (pp), blocks data-parallel replicas (dp), cells in a block tensor-parallel ranks (tp).';
}

function renderDiagnosis() {
  const d = S.state.diagnosis || {};
  const box = $('diagnosis');
  const lines = Array.isArray(d.lines) ? d.lines.filter((l) => typeof l === 'string' && l) : [];
  // An uneven layout ("stages are uneven: ...") names nobody: shown, but no alert.
  const named = (isNum(d.straggler) && d.straggler >= 0) || (isNum(d.bottleneck) && d.bottleneck >= 0);
  if (lines.length) box.replaceChildren(...lines.map((t) => el('p', t))); else box.textContent = NOBODY;
  box.parentElement.classList.toggle('alert', named);
  const busy = Array.isArray(d.busy) ? d.busy : [];
  const neck = isNum(d.bottleneck) && d.bottleneck >= 0 ? ` — bottleneck: stage ${d.bottleneck}`
    : isNum(d.uneven) && d.uneven >= 0 ? ` — uneven layout: stage ${d.uneven} costs most` : '';
  $('stage-busy').textContent = busy.length
    ? `stage busy (forward + backward over step time): ${busy.map((b, i) => `stage ${i} ${fmtPct(b)}`).join(' · ')}${neck}`
    : '';
}

function renderReplay() {
  const { job, replay: r } = S.state;
  const bar = $('replay-bar');
  bar.hidden = !(job && job.mode === 'replay');
  if (bar.hidden || !r) return;
  $('replay-play').textContent = r.playing ? 'Pause' : 'Play';
  const slider = $('replay-slider');
  slider.max = String(isNum(r.duration) ? r.duration : 0);
  if (!ui.sliderDragging) slider.value = String(isNum(r.position) ? r.position : 0);
  showReplayPosition(ui.sliderDragging ? Number(slider.value) : r.position);
  const speed = $('replay-speed');
  if (document.activeElement !== speed && isNum(r.speed)) speed.value = String(r.speed);
}

// ---- Start-up -----------------------------------------------------------------------------------
// The legends' colours (the palette's, and the grid's state fills), the controls, the first render,
// then the WebSocket.
function start() {
  applyPalette();
  applyPalette({ state: STATE_FILL });
  setRenderer(render);
  wireControls();
  wireTeaching();
  wireHoldings();
  setConnected(false);
  markAll();
  renderNow();
  connect();
}

if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
else start();
