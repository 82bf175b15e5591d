// ShardLab dashboard, the rank grid: a band per pipeline stage (pp), a block per data-parallel
// replica (dp), a cell per tensor-parallel rank (tp); cells coloured by state or by wait/compute
// share, flags for failed, silent and straggler ranks, and on hover rings around the rank's tp, dp and
// pp groups with a tooltip of its figures. Up to 64 ranks each cell shows its rank number and under
// it, as far as they fit (from the last line up), the rank's step, its memory now (all categories)
// and its wait share of its recent steps; what each cell shows is left on window.shardlab.gridText. #rank-grid's data-cells, data-straggler and data-failed
// are written by dashboard.js (updateDataAttributes) from ui.grid and the state.
import {
  PALETTE, $, isNum, fmtInt, fmtPct, fmtBytes, fmtSeconds, fmtRanks, sum, fitCanvas, emptyMessage, LUT, lutIndex,
  AXIS, FONT, STRAGGLER, widths, tint,
} from './draw.js';
import { S, ui, hasFlag, isFailed, stragglerRank } from './state.js';

// Cell fills by the rank's state (the legend's .st-* swatches read them as --state-*, set by
// dashboard.js); a failed rank's is a pale tint of the palette's failed.
const STATE_FILL = {
  starting: '#bfd7fb', running: '#9be2b0', finished: '#cfd6df', none: '#eceef1',
  failed: tint(PALETTE.rank.failed, 0.55),
};
const GROUP_RING = PALETTE.group;  // hover rings: tp, dp, pp
const [FAILED, SILENT] = [PALETTE.rank.failed, PALETTE.rank.silent];  // rank flags (straggler: draw.js)

// A rank's coordinates: its row's, else the engine's layout (rank = (pp * dp + dp_i) * tp + tp_i).
function coordOf(r, job) {
  const row = S.state.ranks[r];
  if (row && isNum(row.pp) && isNum(row.tp) && isNum(row.dp)) return [row.pp, row.tp, row.dp];
  const [tp, dp] = [Math.max(1, job.tp | 0), Math.max(1, job.dp | 0)];
  return [Math.floor(r / (tp * dp)), r % tp, Math.floor(r / tp) % dp];
}

// A band per pipeline stage, a block per dp replica (k blocks a line), a cell per tp rank; the
// k that gives the largest cells wins.
function gridLayout(job, W) {
  const n = Math.max(0, job.world | 0);
  const [pp, tp, dp] = [job.pp, job.tp, job.dp].map((x) => Math.max(1, x | 0));
  const [label, bandGap, blockGap, lineGap] = [40, n > 256 ? 8 : 12, tp > 1 ? (n > 256 ? 3 : 6) : 0, tp > 1 ? 3 : 0];
  const maxH = n <= 16 ? 300 : n <= 64 ? 380 : 480;
  let [best, k] = [0, 1];
  for (let kk = 1; kk <= dp; kk++) {
    const lines = Math.ceil(dp / kk);
    const sw = (W - label - 4 - (kk - 1) * blockGap) / (kk * tp);
    const sh = (maxH - (pp - 1) * bandGap - pp * (lines - 1) * lineGap) / (pp * lines);
    const s = Math.min(sw, sh, 96);
    if (s > best) { best = s; k = kk; }
  }
  const s = Math.max(3, Math.floor(best));
  const lines = Math.ceil(dp / k);
  const bandH = lines * s + (lines - 1) * lineGap;
  const gap = s >= 12 ? 3 : s >= 6 ? 2 : 1;
  const ox = label + Math.max(0, Math.floor((W - label - (k * tp * s + (k - 1) * blockGap)) / 2));
  const oy = 4;
  const [xs, ys, coords] = [new Float32Array(n), new Float32Array(n), new Int32Array(3 * n)];
  for (let r = 0; r < n; r++) {
    const [cp, ct, cd] = coordOf(r, job);
    coords.set([cp, ct, cd], 3 * r);
    xs[r] = ox + (cd % k) * (tp * s + blockGap) + ct * s;
    ys[r] = oy + cp * (bandH + bandGap) + Math.floor(cd / k) * (s + lineGap);
  }
  return { n, pp, s, d: s - gap, xs, ys, coords, bandH, bandGap, oy, height: oy + pp * bandH + (pp - 1) * bandGap + 4 };
}

// The ranks of r's tp group (same pp and dp), dp group (same pp and tp), pp group (same tp and dp).
function groupsOf(r, L) {
  const c = L.coords;
  const [p, t, d] = [c[3 * r], c[3 * r + 1], c[3 * r + 2]];
  const g = { tp: [], dp: [], pp: [] };
  for (let i = 0; i < L.n; i++) {
    const [pi, ti, di] = [c[3 * i], c[3 * i + 1], c[3 * i + 2]];
    if (pi === p && di === d) g.tp.push(i);
    if (pi === p && ti === t) g.dp.push(i);
    if (ti === t && di === d) g.pp.push(i);
  }
  return g;
}

function cellFill(row, mode) {
  if (!row) return STATE_FILL.none;
  if (mode === 'state') return isFailed(row) ? STATE_FILL.failed : STATE_FILL[row.state] || STATE_FILL.none;
  const v = mode === 'wait' ? row.wait : row.comp;
  return isNum(v) ? LUT.css[lutIndex(v)] : STATE_FILL.none;
}

function renderGrid() {
  const job = S.state.job;
  const canvas = $('rank-grid');
  $('grid-legend').dataset.mode = ui.gridColour;
  if (!job || !(job.world > 0)) {
    ui.grid = null;
    S.gridText = [];
    const { ctx, w, h } = fitCanvas(canvas, 120);
    return emptyMessage(ctx, w, h, 'no ranks yet');
  }
  const L = ui.grid = gridLayout(job, widths.get('rank-grid'));
  const { ctx } = fitCanvas(canvas, L.height);
  const { ranks } = S.state;
  const d = L.d;
  [ctx.fillStyle, ctx.textAlign] = [AXIS, 'left'];
  const everyBand = Math.ceil(14 / (L.bandH + L.bandGap));
  for (let p = 0; p < L.pp; p += everyBand) {
    ctx.fillText(`pp${p}`, 2, L.oy + p * (L.bandH + L.bandGap) + Math.min(L.bandH, 20) / 2);
  }
  for (let r = 0; r < L.n; r++) {
    ctx.fillStyle = cellFill(ranks[r], ui.gridColour);
    ctx.fillRect(L.xs[r], L.ys[r], d, d);
  }
  // Flags: failed (red cross), silent (grey corner), straggler (amber ring and corner).
  const strag = stragglerRank();
  for (let r = 0; r < L.n; r++) {
    const row = ranks[r];
    if (!row) continue;
    const [x, y] = [L.xs[r], L.ys[r]];
    if (isFailed(row)) drawCross(ctx, x, y, d);
    if (hasFlag(row, 'SILENT')) { ctx.fillStyle = SILENT; corner(ctx, x, y + d, Math.max(3, d * 0.3), -1); }
    if (r === strag || hasFlag(row, 'STRAGGLER')) {
      [ctx.strokeStyle, ctx.fillStyle, ctx.lineWidth] = [STRAGGLER, STRAGGLER, d >= 12 ? 3 : 2];
      ctx.strokeRect(x - 1, y - 1, d + 2, d + 2);
      corner(ctx, x + d, y, Math.max(3, d * 0.32), 1);
    }
  }
  if (ui.hover >= 0 && ui.hover < L.n) drawHoverRings(ctx, L, ui.hover);
  S.gridText = L.n <= 64 && d >= 20 ? drawCellText(ctx, L, ranks, !(job.waits_known === false)) : [];
}

// A filled right triangle in a cell's corner: dir 1 = top-right at (x, y), -1 = bottom-left.
function corner(ctx, x, y, size, dir) {
  ctx.beginPath(); ctx.moveTo(x, y); ctx.lineTo(x - dir * size, y); ctx.lineTo(x, y + dir * size); ctx.fill();
}

function drawCross(ctx, x, y, d) {
  const m = d >= 12 ? d * 0.22 : 0;
  [ctx.strokeStyle, ctx.lineWidth] = [FAILED, d >= 12 ? 2 : 1];
  ctx.beginPath();
  ctx.moveTo(x + m, y + m); ctx.lineTo(x + d - m, y + d - m);
  ctx.moveTo(x + d - m, y + m); ctx.lineTo(x + m, y + d - m);
  ctx.stroke();
}

// Rings around the hovered rank's tp, dp and pp groups (any other rank is in one at most).
function drawHoverRings(ctx, L, r) {
  const g = groupsOf(r, L);
  const d = L.d;
  const w = Math.max(1, Math.min(3, Math.floor(d / 8)));
  for (const dim of ['tp', 'dp', 'pp']) {
    [ctx.strokeStyle, ctx.fillStyle, ctx.lineWidth] = [GROUP_RING[dim], GROUP_RING[dim], w];
    for (const i of g[dim]) {
      if (i === r) continue;
      if (d < 7) ctx.fillRect(L.xs[i], L.ys[i], d, d);
      else ctx.strokeRect(L.xs[i] + w / 2, L.ys[i] + w / 2, d - w, d - w);
    }
  }
  [ctx.strokeStyle, ctx.lineWidth] = ['#111827', d < 7 ? 2 : w + 1];
  ctx.strokeRect(L.xs[r] - 1, L.ys[r] - 1, d + 2, d + 2);
}

// The figures under a rank's number: its step, memory now and wait share (those it has).
function cellFigures(row, waitsKnown) {
  if (!row) return ['not heard'];
  const out = [];
  if (isNum(row.step)) out.push(`step ${row.step}`);
  if (Array.isArray(row.mem) && sum(row.mem) > 0) out.push(fmtBytes(sum(row.mem)));
  if (waitsKnown && isNum(row.wait)) out.push(`wait ${fmtPct(row.wait)}`);
  return out;
}

// Rank numbers and under them the figures that fit the cell (the first that does not, in width or
// height, ends them), up to 64 ranks. Returns the lines drawn, by rank.
function drawCellText(ctx, L, ranks, waitsKnown) {
  const d = L.d;
  const mode = ui.gridColour;
  const numPx = Math.max(10, Math.min(16, Math.floor(d / 3.2)));
  const figPx = Math.max(9, Math.min(12, Math.floor(d / 8)));
  const [numH, figH] = [numPx + 3, figPx + 3];
  const [numFont, figFont] = [`600 ${numPx}px ${FONT}`, `${figPx}px ${FONT}`];
  ctx.textAlign = 'center';
  const shown = new Array(L.n);
  for (let r = 0; r < L.n; r++) {
    const row = ranks[r];
    const v = row && mode !== 'state' ? (mode === 'wait' ? row.wait : row.comp) : null;
    ctx.font = figFont;
    const lines = [];
    let h = numH;
    for (const s of cellFigures(row, waitsKnown)) {
      if (h + figH > d - 4 || ctx.measureText(s).width > d - 4) break;
      lines.push(s);
      h += figH;
    }
    const cx = L.xs[r] + d / 2;
    let y = L.ys[r] + (d - h) / 2;
    ctx.fillStyle = isNum(v) && v > 0.5 ? '#ffffff' : '#1f2328';
    ctx.font = numFont;
    ctx.fillText(String(r), cx, y + numH / 2);
    y += numH;
    ctx.font = figFont;
    for (const s of lines) { ctx.fillText(s, cx, y + figH / 2); y += figH; }
    shown[r] = [String(r), ...lines];
  }
  return shown;
}

// A rank's tooltip: its groups and its row's figures.
function rankTip(r) {
  const [L, row, job] = [ui.grid, S.state.ranks[r], S.state.job];
  const c = L.coords;
  const host = row && row.host ? ` · ${row.host}` : '';
  const title = `rank ${r} · pp${c[3 * r]} tp${c[3 * r + 1]} dp${c[3 * r + 2]}${host}`;
  const g = groupsOf(r, L);
  const rows = [['tp group', fmtRanks(g.tp)], ['dp group', fmtRanks(g.dp)], ['pp group', fmtRanks(g.pp)]];
  if (!row) return { title, rows: rows.concat([['state', 'not heard from yet']]) };
  const now = S.state.now;
  rows.push(
    ['state', String(row.state || '–')], ['step', fmtInt(row.step)],
    ['loss', isNum(row.loss) ? row.loss.toFixed(4) : '–'], ['step time', fmtSeconds(row.sps)],
    ['memory', Array.isArray(row.mem) ? fmtBytes(sum(row.mem)) : '–'], ['peak', fmtBytes(row.peak)],
    ['in collectives', fmtSeconds(row.comm)], ['compute share', fmtPct(row.comp)],
    ['wait share', job && job.waits_known === false ? 'unknown (backend)' : fmtPct(row.wait)],
    ['last seen', isNum(row.seen) && isNum(now) ? `${Math.max(0, now - row.seen).toFixed(1)} s ago` : '–'],
  );
  if (Array.isArray(row.flags) && row.flags.length) rows.push(['flags', row.flags.join(', ').toLowerCase(), 'tt-warn']);
  if (row.reason) rows.push(['reason', String(row.reason), 'tt-bad']);
  return { title, rows };
}

// The rank under the mouse at (x, y) in the canvas, or -1.
function gridHit(x, y) {
  const L = ui.grid;
  if (!L) return -1;
  for (let r = 0; r < L.n; r++) if (x >= L.xs[r] - 1 && x < L.xs[r] + L.s && y >= L.ys[r] - 1 && y < L.ys[r] + L.s) return r;
  return -1;
}

export { STATE_FILL, renderGrid, rankTip, gridHit };
