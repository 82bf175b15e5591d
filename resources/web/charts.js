// ShardLab dashboard, the two charts: rank 0's training and evaluation loss (with evaluation
// accuracy on a right axis) and memory per rank (measured bars by category beside the planned ones,
// binned above 64 ranks). #loss-chart's data-points and #memory-chart's data-ranks are written by
// dashboard.js (updateDataAttributes).
// "Model states only" (#mem-states): params, grads and optimizer_state alone on their own axis, the
// activations (which can dwarf them) and comm left out. Until the user ticks or unticks it, it is on
// when the tallest model-states stack is under MODEL_STATES_SHARE of the tallest whole bar; the
// user's choice then stays (setModelStatesOnly). Each render leaves what it drew on
// window.shardlab.memory (state.js).
import {
  PALETTE, $, isNum, fmtInt, fmtBytes, sum, niceTicks, fitCanvas, emptyMessage, line, el, AXIS, GRIDLINE, FONT,
} from './draw.js';
import { S } from './state.js';

const MAX_MEM_BARS = 64;
const MODEL_STATES = 3;  // params, grads, optimizer_state: job.categories' first three
const MODEL_STATES_SHARE = 0.1;
let statesChoice = null;  // the user's choice (true/false); null: the rule decides

// The user ticked or unticked "Model states only": it stays so.
function setModelStatesOnly(on) { statesChoice = !!on; }

// The colour of memory category `c` (an index into job.categories, the server's MemCategory
// names): the palette's, grey for a name it does not know.
function catFill(c) {
  const job = S.state.job;
  const cats = job && Array.isArray(job.categories) ? job.categories : Object.keys(PALETTE.memory);
  const name = String(cats[c]);
  return Object.hasOwn(PALETTE.memory, name) ? PALETTE.memory[name] : '#9ca3af';
}

// ---- Loss chart ---------------------------------------------------------------------------------
function renderLoss() {
  const { ctx, w, h } = fitCanvas($('loss-chart'), 260);
  const loss = S.state.loss.filter((p) => Array.isArray(p) && isNum(p[0]) && isNum(p[1]));
  const evals = S.state.evals.filter((p) => Array.isArray(p) && isNum(p[0]));
  if (!loss.length && !evals.length) { emptyMessage(ctx, w, h, 'no loss reported yet'); return; }
  const m = { l: 54, r: 46, t: 10, b: 30 };
  const [pw, ph] = [w - m.l - m.r, h - m.t - m.b];
  let [x0, x1, y0, y1] = [Infinity, -Infinity, Infinity, -Infinity];
  for (const p of loss.concat(evals)) {
    x0 = Math.min(x0, p[0]); x1 = Math.max(x1, p[0]);
    if (isNum(p[1])) { y0 = Math.min(y0, p[1]); y1 = Math.max(y1, p[1]); }
  }
  if (!(x1 > x0)) { x0 -= 1; x1 += 1; }
  if (!isNum(y0)) { y0 = 0; y1 = 1; }
  if (!(y1 > y0)) { y0 -= 0.5; y1 += 0.5; }
  const yt = niceTicks(y0, y1, 5);
  const xt = niceTicks(x0, x1, Math.max(2, Math.floor(pw / 90)));
  const X = (s) => m.l + ((s - x0) / (x1 - x0)) * pw;
  const Y = (v) => m.t + ph - ((v - yt.lo) / (yt.hi - yt.lo)) * ph;
  const A = (a) => m.t + ph - a * ph;
  [ctx.fillStyle, ctx.strokeStyle, ctx.lineWidth, ctx.textAlign] = [AXIS, GRIDLINE, 1, 'right'];
  for (const v of yt.ticks) { line(ctx, m.l, Y(v), m.l + pw, Y(v)); ctx.fillText(String(+v.toPrecision(4)), m.l - 6, Y(v)); }
  ctx.textAlign = 'left';
  for (const a of [0, 0.25, 0.5, 0.75, 1]) ctx.fillText(a.toFixed(2), m.l + pw + 6, A(a));
  ctx.textAlign = 'center';
  for (const s of xt.ticks) if (s >= x0 && s <= x1) ctx.fillText(fmtInt(s), X(s), m.t + ph + 12);
  ctx.fillText('step', m.l + pw / 2, h - 7);
  ctx.strokeStyle = '#c9ced6';
  ctx.strokeRect(m.l + 0.5, m.t + 0.5, pw, ph);
  ctx.save(); ctx.beginPath(); ctx.rect(m.l, m.t, pw, ph); ctx.clip();
  drawLossLine(ctx, loss, X, Y, pw);
  // Evaluation accuracy: an orange line with squares, on the right axis (0..1).
  const acc = evals.filter((p) => isNum(p[2]));
  [ctx.strokeStyle, ctx.fillStyle, ctx.lineWidth] = ['#ea580c', '#ea580c', 1.5];
  ctx.beginPath();
  acc.forEach((p, i) => (i ? ctx.lineTo(X(p[0]), A(p[2])) : ctx.moveTo(X(p[0]), A(p[2]))));
  ctx.stroke();
  for (const p of acc) ctx.fillRect(X(p[0]) - 3, A(p[2]) - 3, 6, 6);
  // Evaluation loss: green dots.
  ctx.fillStyle = '#16a34a';
  for (const p of evals) if (isNum(p[1])) { ctx.beginPath(); ctx.arc(X(p[0]), Y(p[1]), 3.5, 0, 2 * Math.PI); ctx.fill(); }
  ctx.restore();
}

// Rank 0's training loss; above two points a pixel, each pixel column's min and max are drawn.
function drawLossLine(ctx, pts, X, Y, pw) {
  [ctx.strokeStyle, ctx.lineWidth] = ['#2563eb', 1.5];
  ctx.beginPath();
  if (pts.length <= 2 * pw) {
    pts.forEach((p, i) => (i ? ctx.lineTo(X(p[0]), Y(p[1])) : ctx.moveTo(X(p[0]), Y(p[1]))));
  } else {
    let [col, lo, hi, first] = [-1, 0, 0, true];
    const flush = () => {
      if (col < 0) return;
      if (first) ctx.moveTo(col, Y(lo)); else ctx.lineTo(col, Y(lo));
      ctx.lineTo(col, Y(hi));
      first = false;
    };
    for (const p of pts) {
      const c = Math.round(X(p[0]));
      if (c !== col) { flush(); col = c; lo = hi = p[1]; } else { lo = Math.min(lo, p[1]); hi = Math.max(hi, p[1]); }
    }
    flush();
  }
  if (pts.length === 1) ctx.arc(X(pts[0][0]), Y(pts[0][1]), 2, 0, 2 * Math.PI);
  ctx.stroke();
}

// ---- Memory per rank ----------------------------------------------------------------------------
// A group per rank, or above 64 ranks per bin of consecutive ranks: the mean by category of its
// measured ranks, their smallest and largest total, the largest peak, and the mean plan.
function memoryGroups() {
  const st = S.state;
  const n = st.ranks.length;
  const planned = st.job && Array.isArray(st.job.planned) ? st.job.planned : null;
  const bin = n > MAX_MEM_BARS ? Math.ceil(n / MAX_MEM_BARS) : 1;
  const ncat = st.job && Array.isArray(st.job.categories) ? st.job.categories.length : 5;
  const groups = [];
  for (let a = 0; a < n; a += bin) {
    const g = { a, b: Math.min(n, a + bin), meas: new Array(ncat).fill(0), plan: [0, 0, 0], count: 0, planCount: 0,
      min: Infinity, max: 0, peak: 0 };
    for (let r = a; r < g.b; r++) {
      const row = st.ranks[r];
      if (row && Array.isArray(row.mem)) {
        for (let c = 0; c < ncat; c++) g.meas[c] += isNum(row.mem[c]) ? row.mem[c] : 0;
        const tot = sum(row.mem.slice(0, ncat));
        [g.count, g.min, g.max] = [g.count + 1, Math.min(g.min, tot), Math.max(g.max, tot)];
        if (isNum(row.peak)) g.peak = Math.max(g.peak, row.peak);
      }
      const p = planned && planned[r];
      if (Array.isArray(p)) { for (let c = 0; c < 3; c++) g.plan[c] += isNum(p[c]) ? p[c] : 0; g.planCount++; }
    }
    if (g.count) g.meas = g.meas.map((v) => v / g.count);
    if (g.planCount) g.plan = g.plan.map((v) => v / g.planCount);
    groups.push(g);
  }
  return { groups, bin, planned: !!planned };
}

function renderMemory() {
  const { ctx, w, h } = fitCanvas($('memory-chart'), 260);
  const M = memoryGroups();
  // The tallest model-states stack and the tallest whole bar decide the switch until the user does.
  const states = (g) => sum(g.meas.slice(0, MODEL_STATES));
  const tallStates = Math.max(0, ...M.groups.map((g) => Math.max(states(g), sum(g.plan))));
  const tallAll = Math.max(0, ...M.groups.map((g) => Math.max(sum(g.meas), sum(g.plan), g.peak, g.max)));
  const only = statesChoice !== null ? statesChoice : tallAll > 0 && tallStates < MODEL_STATES_SHARE * tallAll;
  const box = $('mem-states');
  if (box) box.checked = only;
  const hidden = Math.max(0, ...M.groups.map((g) => sum(g.meas.slice(MODEL_STATES))));
  renderMemoryLegend(only, hidden);
  S.memory = { modelStatesOnly: only, chosen: statesChoice !== null, top: 0, tallest: only ? tallStates : tallAll };
  if (!M.groups.some((g) => g.count || g.planCount)) { emptyMessage(ctx, w, h, 'no memory reported yet'); return; }
  const m = { l: 66, r: 8, t: 10, b: 30 };
  const [pw, ph] = [w - m.l - m.r, h - m.t - m.b];
  const top = Math.max(1, only ? tallStates : tallAll);
  // Ticks in the binary unit of the largest value.
  const unit = Math.pow(1024, Math.max(0, Math.min(4, Math.floor(Math.log(top) / Math.log(1024)))));
  const yt = niceTicks(0, top / unit, 4);
  S.memory.top = yt.hi * unit;  // bytes at the top of the axis
  const Y = (b) => m.t + ph - (b / unit / yt.hi) * ph;
  [ctx.strokeStyle, ctx.fillStyle, ctx.textAlign] = [GRIDLINE, AXIS, 'right'];
  for (const v of yt.ticks) {
    line(ctx, m.l, Y(v * unit), m.l + pw, Y(v * unit));
    ctx.fillText(fmtBytes(v * unit), m.l - 6, Y(v * unit));
  }
  const gw = pw / M.groups.length;
  const bw = Math.max(1, M.planned ? gw * 0.38 : gw * 0.7);
  const left = (i) => m.l + i * gw + (gw - (M.planned ? 2 * bw + 1 : bw)) / 2;
  M.groups.forEach((g, i) => {
    const gx = left(i);
    if (M.planned) { ctx.globalAlpha = 0.45; stack(ctx, gx, bw, g.plan, Y); ctx.globalAlpha = 1; }
    const mx = M.planned ? gx + bw + 1 : gx;
    if (g.count) stack(ctx, mx, bw, only ? g.meas.slice(0, MODEL_STATES) : g.meas, Y);
    if (only) return;  // the peak and the whisker are whole totals: off this axis
    [ctx.strokeStyle, ctx.lineWidth] = ['#111827', 1];
    if (g.peak > 0) line(ctx, mx - 1, Y(g.peak), mx + bw + 1, Y(g.peak));
    if (M.bin > 1 && g.count) {  // the whisker: smallest to largest rank total of the bin
      const cx = mx + bw / 2;
      line(ctx, cx, Y(g.min), cx, Y(g.max));
      for (const v of [g.min, g.max]) line(ctx, cx - 2, Y(v), cx + 2, Y(v));
    }
  });
  // X labels: ranks (or bins), as many as fit; P and M under the bars when there is room.
  [ctx.fillStyle, ctx.textAlign] = [AXIS, 'center'];
  const label = (g) => (M.bin > 1 ? `${g.a}–${g.b - 1}` : String(g.a));
  const every = Math.max(1, Math.ceil((ctx.measureText(label(M.groups[M.groups.length - 1])).width + 10) / gw));
  M.groups.forEach((g, i) => {
    const [x, half] = [m.l + (i + 0.5) * gw, ctx.measureText(label(g)).width / 2];
    if (i % every === 0 && x + half <= w) ctx.fillText(label(g), x, m.t + ph + 11);
  });
  if (M.planned && gw >= 30) {
    ctx.font = `10px ${FONT}`;
    M.groups.forEach((g, i) => {
      ctx.fillText('P', left(i) + bw / 2, m.t + ph + 23);
      ctx.fillText('M', left(i) + bw * 1.5 + 1, m.t + ph + 23);
    });
  } else {
    ctx.fillText(M.bin > 1 ? 'ranks (bins)' : 'rank', m.l + pw / 2, m.t + ph + 23);
  }
}

function stack(ctx, x, bw, values, Y) {
  let base = 0;
  values.forEach((v, c) => {
    if (!(v > 0)) return;
    ctx.fillStyle = catFill(c);
    const [y0, y1] = [Y(base), Y(base + v)];
    ctx.fillRect(x, y1, bw, Math.max(0.5, y0 - y1));
    base += v;
  });
}

// The category legend (from job.categories, names in full; with only the model states drawn, the
// others marked "not drawn") and the note on planning, the switch and binning.
function renderMemoryLegend(only, hidden) {
  const { job, ranks: { length: n } } = S.state;
  const cats = job && Array.isArray(job.categories) ? job.categories : [];
  const planned = !!(job && Array.isArray(job.planned));
  const box = $('mem-legend');
  const key = JSON.stringify([cats, planned, n, only, only ? fmtBytes(hidden) : '']);
  if (box.dataset.key === key) return;
  box.dataset.key = key;
  const item = (c, i) => {
    const off = only && i >= MODEL_STATES;
    const [s, sw] = [el('span', off ? `${c} (not drawn)` : String(c), off ? 'muted' : ''), el('i', '', 'sw')];
    sw.style.background = catFill(i);
    sw.dataset.category = String(c);
    s.prepend(sw);
    return s;
  };
  box.replaceChildren(...cats.map(item), ...(only ? [] : [el('span', '— peak total')]));
  $('mem-sub').textContent = planned ? 'planned (P, pale) beside measured (M)' : 'measured';
  let note = only && hidden > 0
    ? `Model states only: the other categories (up to ${fmtBytes(hidden)} on a rank) are not drawn. ` : '';
  note += planned ? 'Planned: parameters, gradients and optimizer state only (activations and comm are not planned). ' : '';
  if (n > MAX_MEM_BARS) {
    const bin = Math.ceil(n / MAX_MEM_BARS);
    note += `${fmtInt(n)} ranks in ${Math.ceil(n / bin)} bars of ${bin} consecutive ranks: each bar is the bin's mean ` +
      'by category, its whisker spans the smallest to the largest rank total, its tick the largest peak.';
  }
  $('mem-note').textContent = note;
}

export { renderLoss, renderMemory, setModelStatesOnly };
