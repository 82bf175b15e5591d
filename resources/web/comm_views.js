// ShardLab dashboard, the communication views: the heat map (rank x step, comm, wait or compute
// seconds), the table per operation and group, and the timeline of the last steps (a lane per rank).
// #heat-map's data-rows, data-cols, data-drawn-rows and #timeline's data-lanes are written by
// dashboard.js (updateDataAttributes) from ui.heat and the state.
import {
  PALETTE, $, isNum, fmtInt, fmtBytes, fmtSeconds, sum, niceTicks, fitCanvas, emptyMessage, line, LUT, lutIndex,
  AXIS, GRIDLINE, FONT, STRAGGLER, inkOn,
} from './draw.js';
import { S, ui, stragglerRank } from './state.js';

// The timeline's colours: the palette's span kinds (the legend's .sp-* swatches read the same).
const SPAN_FILL = PALETTE.span;
const IDLE = PALETTE.span.idle;
const HEAT_INDEX = { comm: 1, wait: 2, compute: 3 };  // index into a heat column
const HEAT_WHAT = { comm: 'seconds in collectives', wait: 'seconds waiting for peers', compute: 'seconds computing' };
const MAX_HEAT_ROWS = 256;

// ---- Communication heat map ---------------------------------------------------------------------
// Wait by default (a straggler is the light row among dark peers), comm when waits are unknown.
function currentMetric() {
  const job = S.state.job;
  return ui.heatMetric || (job && job.waits_known ? 'wait' : 'comm');
}

// Rows are ranks (above 256 ranks: 1 px rows, each the mean of a bin of consecutive ranks), columns
// steps (binned when narrower than 2 px); one colour per cell through an ImageData, scaled up.
function renderHeat() {
  const metric = currentMetric();
  for (const b of document.querySelectorAll('#heat-metric button')) b.classList.toggle('on', b.dataset.metric === metric);
  const { job, heat } = S.state;
  const cols = heat.cols;
  const n = job ? Math.max(0, job.world | 0) : 0;
  const rowBin = n > MAX_HEAT_ROWS ? Math.ceil(n / MAX_HEAT_ROWS) : 1;
  const rows = Math.ceil(n / rowBin);
  const rowH = rowBin > 1 ? 1 : Math.max(1, Math.min(24, Math.floor(280 / Math.max(1, rows))));
  const m = { l: 48, r: 8, t: 6, b: 24 };
  const plotH = rows * rowH;
  const { ctx, w, h } = fitCanvas($('heat-map'), Math.max(80, plotH + m.t + m.b));
  ui.heat = { n, rows: 0, rowBin, rowH, m, colBin: 1, colW: 0, cols, metric };
  const waitNote = metric === 'wait' && job && job.waits_known === false
    ? 'This backend cannot measure waits: the wait figures say nothing. ' : '';
  const binNote = rowBin > 1
    ? `${fmtInt(n)} ranks: each 1 px row is the mean of ${rowBin} consecutive ranks (hover for their min and max).` : '';
  $('heat-note').textContent = waitNote + binNote;
  $('heat-what').textContent = `${HEAT_WHAT[metric]}, per rank and step`;
  if (!n || !cols.length) { emptyMessage(ctx, w, h, 'no steps yet'); setHeatScale(0); return; }
  const pw = w - m.l - m.r;
  const colBin = Math.max(1, Math.ceil(cols.length / Math.max(1, Math.floor(pw / 2))));
  const ncol = Math.ceil(cols.length / colBin);
  const colW = pw / ncol;
  Object.assign(ui.heat, { rows, colBin, colW });
  const k = HEAT_INDEX[metric];
  const vals = new Float32Array(rows * ncol).fill(NaN);
  let max = 0;
  for (let j = 0; j < ncol; j++) {
    for (let i = 0; i < rows; i++) {
      let [total, cnt] = [0, 0];
      for (let c = j * colBin; c < Math.min(cols.length, (j + 1) * colBin); c++) {
        const arr = cols[c][k];
        if (!Array.isArray(arr)) continue;
        for (let r = i * rowBin, e = Math.min(n, (i + 1) * rowBin); r < e; r++) {
          if (typeof arr[r] === 'number') { total += arr[r]; cnt++; }
        }
      }
      if (cnt) { const v = total / cnt; vals[i * ncol + j] = v; if (v > max) max = v; }
    }
  }
  const img = new ImageData(ncol, rows);
  const px = new Uint32Array(img.data.buffer);
  const none = 0xfff6f4f3;  // no figure: a light grey
  for (let q = 0; q < vals.length; q++) {
    px[q] = Number.isNaN(vals[q]) ? none : LUT.packed[max > 0 ? lutIndex(vals[q] / max) : 0];
  }
  const off = ui.heatCanvas || (ui.heatCanvas = document.createElement('canvas'));
  off.width = ncol;
  off.height = rows;
  off.getContext('2d').putImageData(img, 0, 0);
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(off, m.l, m.t, pw, plotH);
  drawHeatAxes(ctx, cols, { n, rows, rowBin, rowH, ncol, colW, colBin, m, pw, plotH });
  setHeatScale(max);
}

function drawHeatAxes(ctx, cols, g) {
  const { m, pw, plotH } = g;
  [ctx.strokeStyle, ctx.lineWidth] = ['#ffffff', 1];
  if (g.rowH >= 6) for (let i = 1; i < g.rows; i++) line(ctx, m.l, m.t + i * g.rowH - 1, m.l + pw, m.t + i * g.rowH - 1);
  if (g.colW >= 6) for (let j = 1; j < g.ncol; j++) line(ctx, m.l + j * g.colW - 1, m.t, m.l + j * g.colW - 1, m.t + plotH);
  [ctx.fillStyle, ctx.textAlign] = [AXIS, 'right'];
  for (let i = 0; i < g.rows; i += Math.max(1, Math.ceil(14 / g.rowH))) {
    ctx.fillText(String(i * g.rowBin), m.l - 6, m.t + i * g.rowH + g.rowH / 2);
  }
  const strag = stragglerRank();
  if (strag >= 0 && strag < g.n) {  // an amber triangle points at the straggler's row
    const y = m.t + Math.floor(strag / g.rowBin) * g.rowH + g.rowH / 2;
    ctx.fillStyle = STRAGGLER;
    ctx.beginPath(); ctx.moveTo(m.l - 1, y); ctx.lineTo(m.l - 7, y - 4); ctx.lineTo(m.l - 7, y + 4); ctx.fill();
  }
  [ctx.fillStyle, ctx.textAlign] = [AXIS, 'center'];
  const every = Math.max(1, Math.ceil(44 / g.colW));
  for (let j = 0; j < g.ncol; j += every) {
    ctx.fillText(String(cols[j * g.colBin][0]), m.l + (j + 0.5) * g.colW, m.t + plotH + 12);
  }
  ctx.textAlign = 'left';
  ctx.fillText('rank', 2, m.t + plotH + 12);
}

// The colour legend: a gradient (drawn once) between 0 and the largest value shown.
function setHeatScale(max) {
  const c = $('heat-scale');
  if (!c.dataset.drawn) {
    const ctx = c.getContext('2d');
    for (let x = 0; x < c.width; x++) { ctx.fillStyle = LUT.css[lutIndex(x / (c.width - 1))]; ctx.fillRect(x, 0, 1, c.height); }
    c.dataset.drawn = '1';
  }
  $('heat-min').textContent = '0 ms';
  $('heat-max').textContent = fmtSeconds(max);
}

function heatTip(x, y) {
  const H = ui.heat;
  if (!H || !H.rows) return null;
  const j = Math.floor((x - H.m.l) / H.colW);
  const i = Math.floor((y - H.m.t) / H.rowH);
  if (j < 0 || i < 0 || i >= H.rows || j * H.colBin >= H.cols.length) return null;
  const col = H.cols[j * H.colBin];
  const a = i * H.rowBin;
  const b = Math.min(H.n, a + H.rowBin) - 1;
  if (a === b) {
    const val = (k) => (Array.isArray(col[k]) ? fmtSeconds(col[k][a]) : '–');
    return { title: `rank ${a} · step ${col[0]}`, rows: [['comm', val(1)], ['wait', val(2)], ['compute', val(3)]] };
  }
  const arr = Array.isArray(col[HEAT_INDEX[H.metric]]) ? col[HEAT_INDEX[H.metric]].slice(a, b + 1).filter(isNum) : [];
  const [lo, hi] = arr.length ? [Math.min(...arr), Math.max(...arr)] : [NaN, NaN];
  return {
    title: `ranks ${a}–${b} · step ${col[0]} · ${H.metric}`,
    rows: [['min', fmtSeconds(lo)], ['mean', fmtSeconds(arr.length ? sum(arr) / arr.length : NaN)], ['max', fmtSeconds(hi)]],
  };
}

// ---- Communication table ------------------------------------------------------------------------
// One <tr> per (operation, group); rows are updated in place, a cell written only when it changed.
function renderTable() {
  const tbody = $('comm-table').tBodies[0];
  const rows = S.state.comm.filter(Array.isArray);
  while (tbody.rows.length > rows.length) tbody.deleteRow(-1);
  rows.forEach(([op, group, count, bytes, seconds, busbw, maxS, failed], i) => {
    const per = (v) => (count > 0 && isNum(v) ? v / count : NaN);
    const cells = [
      [String(op ?? ''), ''], [String(group ?? ''), ''], [fmtInt(count), 'num'], [fmtBytes(bytes), 'num'],
      [fmtBytes(per(bytes)), 'num'], [fmtSeconds(seconds), 'num'], [fmtSeconds(per(seconds)), 'num'],
      [fmtSeconds(maxS), 'num'], [isNum(busbw) ? `${busbw.toFixed(busbw < 10 ? 2 : 1)} GB/s` : '–', 'num'],
      [fmtInt(failed), failed > 0 ? 'num bad' : 'num'],
    ];
    const tr = tbody.rows[i] || tbody.insertRow();
    cells.forEach(([text, cls], j) => {
      const td = tr.cells[j] || tr.insertCell();
      if (td.textContent !== text) td.textContent = text;
      if (td.className !== cls) td.className = cls;
    });
  });
}

// ---- Timeline -----------------------------------------------------------------------------------
// A lane per rank over the window; the lane's grey background shows through as idle time.
function renderTimeline() {
  const tl = S.state.timeline;
  const lanes = tl && Array.isArray(tl.lanes) ? tl.lanes.filter(Array.isArray) : [];
  const laneH = lanes.length > 8 ? 16 : 22;
  const m = { l: 64, r: 10, t: 6, b: 24 };
  const { ctx, w, h } = fitCanvas($('timeline'), Math.max(80, m.t + m.b + lanes.length * (laneH + 4)));
  ui.tl = null;
  if (!lanes.length) { emptyMessage(ctx, w, h, 'no timeline yet'); $('tl-sub').textContent = 'last steps'; return; }
  let span = isNum(tl.t1) && isNum(tl.t0) ? tl.t1 - tl.t0 : 0;
  for (const [, spans] of lanes) for (const s of spans || []) if (isNum(s[2])) span = Math.max(span, s[2]);
  if (!(span > 0)) span = 1;
  $('tl-sub').textContent = `last steps, ${fmtSeconds(span)}`;
  const pw = w - m.l - m.r;
  const X = (t) => m.l + (t / span) * pw;
  const bottom = m.t + lanes.length * (laneH + 4);
  [ctx.strokeStyle, ctx.fillStyle, ctx.textAlign] = [GRIDLINE, AXIS, 'center'];
  for (const t of niceTicks(0, span, Math.max(2, Math.floor(pw / 110))).ticks) {
    if (t <= span) { line(ctx, X(t), m.t, X(t), bottom); ctx.fillText(fmtSeconds(t), X(t), bottom + 11); }
  }
  const strag = stragglerRank();
  ui.tl = { m, laneH, lanes, span, pw };
  lanes.forEach(([rank, spans], i) => {
    const y = m.t + i * (laneH + 4);
    const us = rank === strag;
    [ctx.fillStyle, ctx.textAlign, ctx.font] = [us ? '#b45309' : '#1f2328', 'left', `${us ? '600 ' : ''}12px ${FONT}`];
    ctx.fillText(`rank ${rank}${us ? ' ⚑' : ''}`, 4, y + laneH / 2);
    ctx.fillStyle = IDLE;
    ctx.fillRect(m.l, y, pw, laneH);
    [ctx.font, ctx.textAlign] = [`11px ${FONT}`, 'center'];
    for (const s of spans || []) {
      if (!Array.isArray(s) || !isNum(s[1]) || !isNum(s[2])) continue;
      const x0 = X(s[1]);
      const wd = Math.max(1, X(s[2]) - x0);
      const fill = s[0] !== 'idle' && Object.hasOwn(SPAN_FILL, s[0]) ? SPAN_FILL[s[0]] : '#9ca3af';
      ctx.fillStyle = fill;
      ctx.fillRect(x0, y, wd, laneH);
      // Inside the span when it fits: the collective's label, else the micro-batch.
      const text = s[0] === 'collective' ? String(s[4] || '') : s[0] !== 'optimizer' && s[3] >= 0 ? String(s[3]) : '';
      if (text && wd > 10 && textWidth(ctx, text) + 6 < wd) {
        ctx.fillStyle = inkOn(fill);
        ctx.fillText(text, x0 + wd / 2, y + laneH / 2);
      }
    }
  });
}

// measureText costs enough over hundreds of spans to be cached by text.
const widths = new Map();
function textWidth(ctx, text) {
  let w = widths.get(text);
  if (w === undefined) { w = ctx.measureText(text).width; if (widths.size < 4096) widths.set(text, w); }
  return w;
}

function timelineTip(x, y) {
  const T = ui.tl;
  if (!T) return null;
  const i = Math.floor((y - T.m.t) / (T.laneH + 4));
  if (i < 0 || i >= T.lanes.length || y - T.m.t - i * (T.laneH + 4) > T.laneH) return null;
  const [rank, spans] = T.lanes[i];
  const t = ((x - T.m.l) / T.pw) * T.span;
  const s = (spans || []).find((q) => Array.isArray(q) && q[1] <= t && t <= q[2]);
  if (!s) return { title: `rank ${rank}`, rows: [['at', fmtSeconds(t)], ['doing', 'idle']] };
  const rows = [['from', fmtSeconds(s[1])], ['to', fmtSeconds(s[2])], ['duration', fmtSeconds(s[2] - s[1])]];
  if (isNum(s[3]) && s[3] >= 0 && s[0] !== 'optimizer') rows.push(['micro-batch', String(s[3])]);
  if (s[4]) rows.push(['operation', String(s[4])]);
  return { title: `rank ${rank} · ${String(s[0])}`, rows };
}

export { renderHeat, heatTip, renderTable, renderTimeline, timelineTip };
