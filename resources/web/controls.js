// ShardLab dashboard, the controls: the replay buttons, slider and speed (and the position text
// beside them), the grid's colour, the memory chart's "model states only" and the heat map's metric, the mouse over the canvases
// (tooltips, the grid's hover rings), redraws on resize. dashboard.js wires them at start-up.
import { $, isNum, showTip } from './draw.js';
import { S, ui, mark, scheduleRender } from './state.js';
import { send } from './socket.js';
import { gridHit, rankTip } from './rank_grid.js';
import { heatTip, timelineTip } from './comm_views.js';
import { setModelStatesOnly } from './charts.js';

// ---- Tooltip and mouse --------------------------------------------------------------------------
// Rebuilds the visible tooltip, after a move or from a fresh frame (the mouse did not move).
function refreshTip() {
  if (!ui.tipFor || !ui.mouse) return;
  const { kind, x, y } = ui.tipFor;
  let tip = null;
  if (kind === 'grid') tip = ui.grid && ui.hover >= 0 && ui.hover < ui.grid.n ? rankTip(ui.hover) : null;
  else if (kind === 'heat') tip = heatTip(x, y);
  else tip = timelineTip(x, y);
  showTip(tip, ui.mouse.x, ui.mouse.y);
}


// Mouse handling of one canvas: `kind` picks the tooltip; the grid also redraws its group rings.
function watchCanvas(id, kind) {
  const canvas = $(id);
  canvas.addEventListener('mousemove', (e) => {
    const box = canvas.getBoundingClientRect();
    const [x, y] = [e.clientX - box.left, e.clientY - box.top];
    ui.mouse = { x: e.clientX, y: e.clientY };
    ui.tipFor = { kind, x, y };
    if (kind === 'grid') {
      const r = gridHit(x, y);
      if (r !== ui.hover) { ui.hover = r; mark('grid'); scheduleRender(); }
    }
    refreshTip();
  });
  canvas.addEventListener('mouseleave', () => {
    ui.tipFor = null;
    showTip(null);
    if (kind === 'grid' && ui.hover !== -1) { ui.hover = -1; mark('grid'); scheduleRender(); }
  });
}

// ---- Controls -----------------------------------------------------------------------------------
function wireControls() {
  $('replay-play').addEventListener('click', () => {
    const playing = !!(S.state.replay && S.state.replay.playing);
    send({ cmd: playing ? 'pause' : 'play' });
    $('replay-play').textContent = playing ? 'Play' : 'Pause';  // the next frame confirms
  });
  const slider = $('replay-slider');
  slider.addEventListener('pointerdown', () => { ui.sliderDragging = true; });
  slider.addEventListener('input', () => { ui.sliderDragging = true; showReplayPosition(Number(slider.value)); });
  slider.addEventListener('change', () => { ui.sliderDragging = false; send({ cmd: 'seek', t: Number(slider.value) }); });
  $('replay-speed').addEventListener('change', (e) => send({ cmd: 'speed', x: Number(e.target.value) }));
  $('grid-colour').addEventListener('change', (e) => { ui.gridColour = e.target.value; mark('grid'); scheduleRender(); });
  $('mem-states').addEventListener('change', (e) => { setModelStatesOnly(e.target.checked); mark('memory'); scheduleRender(); });
  for (const b of document.querySelectorAll('#heat-metric button')) {
    b.addEventListener('click', () => { ui.heatMetric = b.dataset.metric; mark('heat'); scheduleRender(); });
  }
  watchCanvas('rank-grid', 'grid');
  watchCanvas('heat-map', 'heat');
  watchCanvas('timeline', 'timeline');
  // A change of the panels' widths (window, the layout switching columns, zoom) redraws the canvases.
  const redraw = () => { mark('grid', 'loss', 'memory', 'heat', 'timeline'); scheduleRender(); };
  if (window.ResizeObserver) new ResizeObserver(redraw).observe(document.querySelector('.panels'));
  window.addEventListener('resize', redraw);
}

// The replay bar's position text; `t` seconds from the recording's start.
function showReplayPosition(t) {
  const r = S.state.replay || {};
  const dur = isNum(r.duration) ? r.duration : 0;
  const at = (isNum(t) ? t : 0).toFixed(1);
  $('replay-pos').textContent = `step ${isNum(r.step) ? r.step : 0} · ${at} s / ${dur.toFixed(1)} s`;
}

export { refreshTip, showReplayPosition, wireControls };
