// ShardLab dashboard, "Who holds what": a strip per rank on one horizontal axis, the whole model's
// flat index range [0, total); in each strip a lane for the parameters, one for the gradients and
// one per optimizer state array (each drawing the optimizer-state ranges), the rank's held ranges
// filled at their true offsets in the palette's memory colours, the rest of the lane empty. Thin
// vertical lines mark the tensors' boundaries; a hatched stub after the axis's end marks padding
// (not to scale). Beside each lane the ledger's measured bytes and the planner's. From the frames'
// `layout` section (README.md; net/web/layout_json.h). What it drew is window.shardlab.holdings
// ({ranks: [{rank, lanes: [{lane, ranges, index_ranges, y0, y1, padding}]}], axis: {x0, x1, total},
// highlights: what the step scrubber's frame touches, step_replay.js}, ranges in canvas CSS pixels),
// and #holdings's data-ranks the ranks drawn with a layout. The axis's ruler and the tensors' names
// are a canvas of their own (#holdings-axis), sticky at the top of the box the strips scroll in.
import {
  PALETTE, $, isNum, fmtInt, fmtBytes, niceTicks, fitCanvas, line, showTip, tint, widths, AXIS, FONT,
} from './draw.js';
import { S, mark, scheduleRender } from './state.js';
import { renderStep, drawHighlights, wireStep } from './step_replay.js';

const CATS = ['params', 'grads', 'optimizer_state'];
const BOUNDARY = 'rgba(17, 24, 39, 0.45)';  // a tensor boundary, across every strip
const EMPTY = '#f6f7f9';  // a lane's part the rank does not hold
const OUTLINE = '#c9ced6';
const PAD_GAP = 3;  // the padding stub: this far after the axis's end, this wide
const PAD_W = 8;
const NO_LAYOUT = 'layout unknown (no LAYOUT event: an older worker or recording)';
const mouse = { x: -1, y: -1, clientX: 0, clientY: 0, over: false };
let geo = null;  // the last render's geometry, for the tooltip
let measurer = null;  // a context of a canvas never shown, to measure text with

// The lane sizes by the number of ranks: roomy up to 16, compact up to 64, bare strips beyond
// (no lane names or byte figures; the panel scrolls).
function tierOf(n) {
  if (n <= 16) return { laneH: 14, laneGap: 2, stripGap: 10, font: 11, text: true };
  if (n <= 64) return { laneH: 11, laneGap: 1, stripGap: 6, font: 10, text: true };
  return { laneH: 3, laneGap: 0, stripGap: 3, font: 10, text: false };
}

// The memory colour of a category (grey for a name the palette does not know).
const catFill = (cat) => (Object.hasOwn(PALETTE.memory, cat) ? PALETTE.memory[cat] : '#9ca3af');

// A rank's lanes: params, grads, then one per state array drawing the optimizer-state ranges.
function lanesOf(entry) {
  const held = entry.held || {};
  const ok = (r) => Array.isArray(r) && isNum(r[0]) && isNum(r[1]);
  const ranges = (cat) => (Array.isArray(held[cat]) ? held[cat].filter(ok) : []);
  const pad = (cat) => (entry.padding && isNum(entry.padding[cat]) ? entry.padding[cat] : 0);
  const lanes = [
    { lane: 'params', cat: 'params', ranges: ranges('params'), padding: pad('params'), share: 1 },
    { lane: 'grads', cat: 'grads', ranges: ranges('grads'), padding: pad('grads'), share: 1 },
  ];
  const arrays = Array.isArray(entry.state_arrays) ? entry.state_arrays.map(String) : [];
  const names = arrays.length ? arrays : ['optimizer_state'];
  for (const name of names) {
    lanes.push({ lane: name, cat: 'optimizer_state', ranges: ranges('optimizer_state'), padding: pad('optimizer_state'),
      share: 1 / names.length });
  }
  return lanes;
}

// Whether a rank should have sent its LAYOUT by now: it is published once the rank has set up,
// before the rank says it runs.
function settled(row) {
  return !!row && (row.state === 'running' || row.state === 'finished' || (isNum(row.step) && row.step > 0));
}

// The ledger's measured bytes of `cat` on rank r's row (job.categories gives the order), or NaN.
function measured(r, cat) {
  const { job, ranks } = S.state;
  const row = ranks[r];
  const cats = job && Array.isArray(job.categories) ? job.categories : CATS;
  const i = cats.indexOf(cat);
  return row && Array.isArray(row.mem) && i >= 0 && isNum(row.mem[i]) ? row.mem[i] : NaN;
}

function laneBytes(r, entry, ln) {
  const planned = entry.planned && isNum(entry.planned[ln.cat]) ? entry.planned[ln.cat] * ln.share : NaN;
  return { measured: measured(r, ln.cat) * ln.share, planned };
}

const bytesText = (b) => `${fmtBytes(b.measured)} measured / ${fmtBytes(b.planned)} formula`;

// How much of each pixel column of the axis the ranges cover (0..1): a column the ranges fill is
// painted in the lane's colour, a column they cover in part (a range's end, or the rows of a
// tensor-parallel slice finer than a pixel) as that share of it, at least a faint 30% so that a
// range narrower than a pixel still shows.
function coverage(ranges, X, x0, n) {
  const cov = new Float32Array(n);
  for (const [b, e] of ranges) {
    const [xa, xb] = [X(b) - x0, X(e) - x0];
    for (let c = Math.max(0, Math.floor(xa)); c < Math.min(n, Math.ceil(xb)); c++) {
      cov[c] += Math.min(xb, c + 1) - Math.max(xa, c);
    }
  }
  return cov;
}

function paintLane(ctx, cov, x0, y, h) {
  const n = cov.length;
  for (let c = 0; c < n;) {
    if (cov[c] >= 0.999) {  // a run of full columns: one rectangle
      let d = c;
      while (d < n && cov[d] >= 0.999) d++;
      ctx.fillRect(x0 + c, y, d - c, h);
      c = d;
    } else {
      if (cov[c] > 0.001) {
        ctx.globalAlpha = Math.max(0.3, cov[c]);
        ctx.fillRect(x0 + c, y, 1, h);
        ctx.globalAlpha = 1;
      }
      c++;
    }
  }
}

// The messages above the strips: the formula of rank 0 (or of the first rank with a layout), the
// subtitle, and what is unknown.
function renderText(layout, entries, world) {
  const first = entries.find((e) => e.rank === 0) || entries[0];
  $('holdings-formula').textContent = first && first.formula
    ? `formula (rank ${first.rank}, planner's bytes): ${first.formula}` : '';
  const total = totalOf(layout);
  $('holdings-sub').textContent = layout
    ? `${first ? `${first.strategy} · ` : ''}${fmtInt(total)} elements × ${layout.bytes_per_element} B · ` +
      `${fmtInt(Array.isArray(layout.tensors) ? layout.tensors.length : 0)} tensors` : 'flat parameter index';
  const cut = entries.filter((e) => e.truncated).map((e) => e.rank);
  const notes = [];
  if (cut.length) notes.push(`rank${cut.length > 1 ? 's' : ''} ${cut.join(', ')}: range lists cut at 16,384.`);
  if (entries.length && entries.length < world) notes.push(`${world - entries.length} of ${world} ranks sent no LAYOUT.`);
  $('holdings-note').textContent = notes.join(' ');
}

function totalOf(layout) {
  if (!layout || !Array.isArray(layout.tensors)) return 0;
  let t = 0;
  for (const x of layout.tensors) if (x && isNum(x.offset) && isNum(x.size)) t = Math.max(t, x.offset + x.size);
  return t;
}

// What is said instead of the strips when no rank has sent a layout.
function unknownMessage() {
  const { job, ranks } = S.state;
  if (!ranks.some(settled)) return 'No layout yet: each rank sends its LAYOUT event once it has set up.';
  return job && job.mode === 'replay'
    ? 'Layout unknown: this run\'s ranks sent no LAYOUT event (recorded before protocol version 4)'
    : 'Layout unknown: this run\'s ranks sent no LAYOUT event (workers before protocol version 4 send none)';
}

function renderHoldings() {
  const canvas = $('holdings');
  const layout = S.state.layout;
  const job = S.state.job;
  const entries = layout && Array.isArray(layout.ranks)
    ? layout.ranks.filter((e) => e && isNum(e.rank)).sort((a, b) => a.rank - b.rank) : [];
  const total = totalOf(layout);
  const world = Math.max(job ? job.world | 0 : 0, entries.length ? entries[entries.length - 1].rank + 1 : 0);
  renderStep();
  renderText(layout, entries, world);
  const msg = !layout || !entries.length || !(total > 0) ? unknownMessage() : '';
  $('holdings-msg').textContent = msg;
  const box = $('holdings-box');
  if (box.hidden && !msg) { box.hidden = false; widths.set('holdings', Math.max(60, box.clientWidth)); }
  box.hidden = !!msg;
  if (msg) {
    geo = null;
    S.holdings = { ranks: [], axis: null, unknown: [], highlights: [], message: msg };
    canvas.dataset.ranks = '0';
    return;
  }
  const byRank = new Map(entries.map((e) => [e.rank, e]));
  const T = tierOf(world);
  const W = widths.get('holdings') || Math.max(60, canvas.parentElement.clientWidth);
  // Left: rank labels, then lane names; right: the padding stub, then the byte figures.
  const probe = measurer || (measurer = document.createElement('canvas').getContext('2d'));
  probe.font = `${T.font}px ${FONT}`;
  let laneW = 0;
  let textW = 0;
  for (const e of entries) {
    for (const ln of lanesOf(e)) {
      laneW = Math.max(laneW, probe.measureText(ln.lane).width);
      textW = Math.max(textW, probe.measureText(bytesText(laneBytes(e.rank, e, ln))).width);
    }
  }
  probe.font = `12px ${FONT}`;
  const rankW = probe.measureText(`rank ${world - 1}`).width;
  let x0 = Math.ceil(6 + rankW + (T.text ? 10 + laneW : 0) + 8);
  let right = PAD_GAP + PAD_W + (T.text ? 12 + Math.ceil(textW) : 4);
  const showBytes = T.text && W - x0 - right >= 200;
  if (!showBytes) right = PAD_GAP + PAD_W + 4;
  const x1 = W - right;
  if (!(x1 - x0 >= 40)) x0 = Math.max(0, x1 - 40);
  const X = (i) => x0 + (i / total) * (x1 - x0);
  const top = 6;  // the axis (index ticks, tensor names) is #holdings-axis, above the strips
  const axisH = 34;
  const lanesH = (k) => k * T.laneH + (k - 1) * T.laneGap;
  const strips = [];
  let y = top;
  for (let r = 0; r < world; r++) {
    const e = byRank.get(r);
    const lanes = e ? lanesOf(e) : [];
    const h = e ? lanesH(lanes.length) : 16;
    strips.push({ rank: r, entry: e, lanes, y, h });
    y += h + T.stripGap;
  }
  widths.set('holdings-axis', W);
  const axisCtx = fitCanvas($('holdings-axis'), axisH).ctx;
  drawAxis(axisCtx, layout, total, X, x0, x1, axisH);
  [axisCtx.strokeStyle, axisCtx.lineWidth] = [BOUNDARY, 1];
  for (const o of boundaries(layout, total)) line(axisCtx, X(o), axisH - 4, X(o), axisH);
  const { ctx, w, h } = fitCanvas(canvas, y - T.stripGap + 8);
  const model = { ranks: [], axis: { x0, x1, total }, unknown: [], highlights: [] };
  const every = Math.max(1, Math.ceil(14 / (strips.length ? strips[0].h + T.stripGap : 14)));
  strips.forEach((s, i) => {
    const row = S.state.ranks[s.rank];
    [ctx.fillStyle, ctx.textAlign, ctx.font] = ['#1f2328', 'left', `12px ${FONT}`];
    if (i % every === 0 || s.entry === undefined) ctx.fillText(`rank ${s.rank}`, 4, s.y + Math.min(s.h, 16) / 2);
    if (!s.entry) {
      model.unknown.push(s.rank);
      [ctx.fillStyle, ctx.font] = [AXIS, `italic ${T.font + 1}px ${FONT}`];
      ctx.fillText(settled(row) ? NO_LAYOUT : 'no LAYOUT yet (sent once the rank has set up)', x0, s.y + s.h / 2);
      return;
    }
    const lanesOut = [];
    s.lanes.forEach((ln, k) => {
      const ly = s.y + k * (T.laneH + T.laneGap);
      const colour = catFill(ln.cat);
      ctx.fillStyle = EMPTY;
      ctx.fillRect(x0, ly, x1 - x0, T.laneH);
      ctx.fillStyle = colour;
      paintLane(ctx, coverage(ln.ranges, X, x0, Math.ceil(x1 - x0)), x0, ly, T.laneH);
      if (T.laneH >= 6) {
        [ctx.strokeStyle, ctx.lineWidth] = [OUTLINE, 1];
        ctx.strokeRect(Math.round(x0) - 0.5, ly - 0.5, Math.round(x1) - Math.round(x0) + 1, T.laneH + 1);
      }
      if (ln.padding > 0) drawPad(ctx, x1 + PAD_GAP, ly, PAD_W, T.laneH, colour);
      if (T.text) {
        [ctx.fillStyle, ctx.textAlign, ctx.font] = [AXIS, 'right', `${T.font}px ${FONT}`];
        ctx.fillText(ln.lane, x0 - 8, ly + T.laneH / 2);
        if (showBytes) {
          ctx.textAlign = 'left';
          ctx.fillText(bytesText(laneBytes(s.rank, s.entry, ln)), x1 + PAD_GAP + PAD_W + 12, ly + T.laneH / 2);
        }
      }
      lanesOut.push({ lane: ln.lane, ranges: ln.ranges.map(([b, e]) => [X(b), X(e)]),
        index_ranges: ln.ranges.map(([b, e]) => [b, e]), y0: ly, y1: ly + T.laneH, padding: ln.padding });
    });
    model.ranks.push({ rank: s.rank, lanes: lanesOut });
  });
  // The tensors' boundaries across every strip (the axis's ends are the lanes' outlines), broken
  // where a strip says its layout is unknown.
  [ctx.strokeStyle, ctx.lineWidth] = [BOUNDARY, 1];
  const offsets = boundaries(layout, total);
  const runs = [];
  let from = 0;
  for (const s of strips) {
    if (s.entry) continue;
    if (s.y - 2 > from) runs.push([from, s.y - 2]);
    from = s.y + s.h + 2;
  }
  if (h - 8 > from) runs.push([from, h - 8]);
  // What the step scrubber's frame touches, over the lanes (the tensors' boundaries above it).
  model.highlights = drawHighlights(ctx, strips, (s, k) => s.y + k * (T.laneH + T.laneGap), T.laneH, X, w);
  [ctx.strokeStyle, ctx.lineWidth] = [BOUNDARY, 1];
  for (const o of offsets) for (const [ya, yb] of runs) line(ctx, X(o), ya, X(o), yb);
  geo = { strips, T, x0, x1, total, X, layout, offsets, w };
  S.holdings = model;
  canvas.dataset.ranks = String(model.ranks.length);
  if (mouse.over) showTip(holdingsTip(mouse.x, mouse.y), mouse.clientX, mouse.clientY);
}

// The tensors' inner boundaries (offsets strictly inside (0, total)), sorted.
function boundaries(layout, total) {
  const s = new Set();
  for (const t of layout.tensors || []) if (t && isNum(t.offset) && t.offset > 0 && t.offset < total) s.add(t.offset);
  return [...s].sort((a, b) => a - b);
}

// Index ticks along the top, and below them the names of the tensors whose span holds them.
function drawAxis(ctx, layout, total, X, x0, x1, top) {
  [ctx.fillStyle, ctx.textAlign, ctx.font] = [AXIS, 'center', `10px ${FONT}`];
  const nt = niceTicks(0, total, Math.max(2, Math.floor((x1 - x0) / 90)));
  const endW = ctx.measureText(fmtInt(total)).width;
  [ctx.strokeStyle, ctx.lineWidth] = [OUTLINE, 1];
  for (const t of nt.ticks) {
    if (t < 0 || t > total) continue;
    const x = X(t);
    if (t > 0 && x + 24 > x1 - endW) continue;  // room for the end's label
    ctx.textAlign = t === 0 ? 'left' : 'center';
    ctx.fillText(fmtInt(t), t === 0 ? x0 : x, 7);
    line(ctx, x, 13, x, 16);
  }
  ctx.textAlign = 'right';
  ctx.fillText(fmtInt(total), x1, 7);
  line(ctx, x1, 13, x1, 16);
  ctx.textAlign = 'center';
  ctx.fillStyle = '#374151';
  for (const t of layout.tensors || []) {
    if (!t || !isNum(t.offset) || !isNum(t.size)) continue;
    const [a, b] = [X(t.offset), X(t.offset + t.size)];
    const name = String(t.name);
    if (ctx.measureText(name).width + 8 < b - a) ctx.fillText(name, (a + b) / 2, top - 10);
  }
}

// Padding: a hatched stub of fixed width after the axis's end (its size is in the tooltip).
function drawPad(ctx, x, y, w, h, colour) {
  ctx.save();
  ctx.beginPath(); ctx.rect(x, y, w, h); ctx.clip();
  ctx.fillStyle = tint(colour, 0.7);
  ctx.fillRect(x, y, w, h);
  [ctx.strokeStyle, ctx.lineWidth] = [colour, 1.5];
  ctx.beginPath();
  for (let d = -h; d < w; d += 4) { ctx.moveTo(x + d, y + h); ctx.lineTo(x + d + h, y); }
  ctx.stroke();
  ctx.restore();
}

// The tooltip at (x, y) in the canvas: the rank and lane, the tensor under the mouse and its range,
// whether the rank holds that index; over the stub, the padding.
function holdingsTip(x, y) {
  const G = geo;
  if (!G) return null;
  const s = G.strips.find((q) => y >= q.y - 1 && y < q.y + q.h + 1);
  if (!s) return null;
  if (!s.entry) {
    const said = settled(S.state.ranks[s.rank]) ? 'unknown (no LAYOUT event)' : 'not sent yet';
    return { title: `rank ${s.rank}`, rows: [['layout', said]] };
  }
  const k = Math.min(s.lanes.length - 1, Math.max(0, Math.floor((y - s.y) / (G.T.laneH + G.T.laneGap))));
  const ln = s.lanes[k];
  const array = ln.cat === 'optimizer_state' && ln.lane !== 'optimizer_state';
  const title = `rank ${s.rank} · ${ln.lane}${array ? ' (optimizer state)' : ''}`;
  const b = laneBytes(s.rank, s.entry, ln);
  const tail = [
    ['measured', fmtBytes(b.measured)], ['formula', fmtBytes(b.planned)], ['strategy', String(s.entry.strategy || '–')],
  ];
  if (x > G.x1 && x <= G.x1 + PAD_GAP + PAD_W + 2 && ln.padding > 0) {
    const pad = [['padding', `+${fmtInt(ln.padding)} pad`], ['', 'elements beyond the ranges (stub not to scale)']];
    return { title, rows: pad.concat(tail) };
  }
  if (x < G.x0 || x > G.x1) return { title, rows: tail };
  const i = Math.min(G.total - 1, Math.max(0, Math.floor(((x - G.x0) / (G.x1 - G.x0)) * G.total)));
  const rows = [];
  const t = (G.layout.tensors || []).find((q) => q && q.offset <= i && i < q.offset + q.size);
  if (t) rows.push(['tensor', String(t.name)], ['its range', `[${fmtInt(t.offset)}, ${fmtInt(t.offset + t.size)})`]);
  rows.push(['index', fmtInt(i)]);
  const h = ln.ranges.find(([lo, hi]) => lo <= i && i < hi);
  rows.push(['held here', h ? `yes, in [${fmtInt(h[0])}, ${fmtInt(h[1])})` : 'no']);
  return { title, rows: rows.concat(tail) };
}

// The mouse over the strips (the tooltip), and a redraw when the panel's width changes.
function wireHoldings() {
  wireStep();
  const canvas = $('holdings');
  canvas.addEventListener('mousemove', (e) => {
    const box = canvas.getBoundingClientRect();
    Object.assign(mouse, { x: e.clientX - box.left, y: e.clientY - box.top, over: true });
    Object.assign(mouse, { clientX: e.clientX, clientY: e.clientY });
    showTip(holdingsTip(mouse.x, mouse.y), e.clientX, e.clientY);
  });
  canvas.addEventListener('mouseleave', () => { mouse.over = false; showTip(null); });
  const redraw = () => { mark('holdings'); scheduleRender(); };
  if (window.ResizeObserver) new ResizeObserver(redraw).observe($('holdings-panel'));
  window.addEventListener('resize', redraw);
}

export { renderHoldings, wireHoldings };
