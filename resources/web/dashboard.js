// ShardLab live dashboard: applies the server's "full" and "delta" frames (wire format version 1)
// to one merged state and redraws what changed, at most once per animation frame, on <canvas>.
// No libraries, no build step; every string from the server goes in through textContent.
'use strict';

(() => {
  // ---- Constants ---------------------------------------------------------------------------------
  // Keep these in step with the legend classes in dashboard.css.
  const STATE_FILL = {
    starting: '#bfd7fb', running: '#9be2b0', finished: '#cfd6df', failed: '#f19a9a', none: '#eceef1',
  };
  const GROUP_RING = { tp: '#ff6e00', dp: '#0050ff', pp: '#c800c8' };  // as the desktop app
  const [STRAGGLER, FAILED, SILENT] = ['#f0af00', '#c81e1e', '#5f6672'];  // rank flags
  const CAT_FILL = ['#4e79a7', '#f28e2b', '#59a14f', '#b07aa1', '#76b7b2', '#9c755f'];
  const SPAN_FILL = { forward: '#3b82f6', backward: '#10b981', optimizer: '#8b5cf6', collective: '#f59e0b' };
  const [IDLE, AXIS, GRIDLINE] = ['#e9ecf1', '#6b7280', '#eceef1'];
  const FONT = 'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif';
  // ColorBrewer "Purples", light (low) to dark (high): the heat map and the grid's share colouring.
  const PURPLES = ['#efedf5', '#dadaeb', '#bcbddc', '#9e9ac8', '#807dba', '#6a51a3', '#54278f', '#3f007d'];
  const HEAT_INDEX = { comm: 1, wait: 2, compute: 3 };  // index into a heat column
  const HEAT_WHAT = { comm: 'seconds in collectives', wait: 'seconds waiting for peers', compute: 'seconds computing' };
  const CANVASES = ['rank-grid', 'loss-chart', 'memory-chart', 'heat-map', 'timeline'];
  const [MAX_MEM_BARS, MAX_HEAT_ROWS] = [64, 256];
  const NOBODY = 'nobody holds the others back';

  // ---- Shared state ------------------------------------------------------------------------------
  // window.shardlab: frames = renders done, frameTimes = their durations in ms (last 200),
  // lastFrame = the `frame` counter of the newest frame applied, received = frames applied.
  const S = window.shardlab = {
    frames: 0, frameTimes: [], lastFrame: null, state: emptyState(), connected: false,
    received: 0, apply: applyFrame, renderNow,
  };
  const ui = {
    dirty: new Set(), raf: 0, hover: -1, mouse: null, tipFor: null, gridColour: 'state', heatMetric: null,
    sliderDragging: false, widths: new Map(), grid: null, heat: null, tl: null, heatCanvas: null,
  };
  const net = { ws: null, backoff: 500 };
  const LUT = buildLut();
  const $ = (id) => document.getElementById(id);

  function emptyState() {
    return { frame: 0, now: 0, job: null, replay: null, ranks: [], diagnosis: { straggler: -1, lines: [], busy: [] },
      loss: [], evals: [], heat: { first: 0, last: 0, cols: [] }, comm: [], timeline: null };
  }

  // ---- Formatting --------------------------------------------------------------------------------
  const isNum = (x) => typeof x === 'number' && Number.isFinite(x);
  const fmtInt = (x) => (isNum(x) ? Math.round(x).toLocaleString('en-US') : '–');
  const fmtPct = (x) => (isNum(x) ? `${Math.round(x * 100)}%` : '–');
  const sum = (a) => a.reduce((s, v) => s + (isNum(v) ? v : 0), 0);

  function fmtBytes(b) {
    if (!isNum(b)) return '–';
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    let v = Math.abs(b);
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return `${(Math.sign(b) * v).toFixed(i === 0 || v >= 100 ? 0 : v >= 10 ? 1 : 2)} ${units[i]}`;
  }

  // Seconds as µs or ms (below 10 s), else s.
  function fmtSeconds(s) {
    if (!isNum(s)) return '–';
    const a = Math.abs(s);
    if (a === 0) return '0 ms';
    if (a < 1e-3) return `${+(s * 1e6).toFixed(a < 1e-5 ? 2 : 0)} µs`;
    if (a < 10) return `${+(s * 1e3).toFixed(a < 0.01 ? 2 : a < 0.1 ? 1 : 0)} ms`;
    return `${s.toFixed(a < 100 ? 2 : 1)} s`;
  }

  // A sorted rank list as ranges: "0–3, 8, 12–15 (9 ranks)", at most `max` parts.
  function fmtRanks(list, max = 8) {
    const parts = [];
    for (let i = 0; i < list.length;) {
      let j = i;
      while (j + 1 < list.length && list[j + 1] === list[j] + 1) j++;
      parts.push(j > i ? `${list[i]}–${list[j]}` : `${list[i]}`);
      i = j + 1;
    }
    const shown = parts.length > max ? `${parts.slice(0, max).join(', ')}, …` : parts.join(', ');
    return list.length > 1 ? `${shown} (${list.length} ranks)` : shown;
  }

  // "Nice" axis ticks: [lo, hi] widened to whole steps, and the ticks between.
  function niceTicks(lo, hi, count) {
    if (!(hi > lo)) hi = lo + 1;
    const raw = (hi - lo) / Math.max(1, count);
    const mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) || 10 * mag;
    const a = Math.floor(lo / step + 1e-9);
    const b = Math.ceil(hi / step - 1e-9);
    const ticks = [];
    for (let i = a; i <= b; i++) ticks.push(+(i * step).toPrecision(12));
    return { ticks, lo: a * step, hi: b * step };
  }

  // 256 colours of the Purples ramp: packed RGBA (little-endian, for ImageData) and CSS strings.
  function buildLut() {
    const stops = PURPLES.map((h) => [1, 3, 5].map((i) => parseInt(h.slice(i, i + 2), 16)));
    const packed = new Uint32Array(256);
    const css = new Array(256);
    for (let i = 0; i < 256; i++) {
      const x = (i / 255) * (stops.length - 1);
      const k = Math.min(Math.floor(x), stops.length - 2);
      const c = stops[k].map((u, j) => Math.round(u + (stops[k + 1][j] - u) * (x - k)));
      packed[i] = ((255 << 24) | (c[2] << 16) | (c[1] << 8) | c[0]) >>> 0;
      css[i] = `rgb(${c[0]},${c[1]},${c[2]})`;
    }
    return { packed, css };
  }
  const lutIndex = (f) => Math.max(0, Math.min(255, Math.round(f * 255)));

  // ---- Applying frames ---------------------------------------------------------------------------
  function mark(...what) { for (const w of what) ui.dirty.add(w); }
  function markAll() {
    mark('header', 'diagnosis', 'replay', 'grid', 'loss', 'memory', 'heat', 'table', 'timeline', 'tip');
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
      mark('header', 'replay', 'grid', 'memory', 'heat');
    }
    if (f.replay) { st.replay = f.replay; mark('replay'); }
    if (f.ranks) { mergeRanks(st, f.ranks); mark('grid', 'memory', 'tip'); }
    if (f.diagnosis) { st.diagnosis = f.diagnosis; mark('diagnosis', 'grid', 'heat', 'timeline'); }
    if (f.loss) { appendSeries(st.loss, f.loss); mark('loss'); }
    if (f.evals) { appendSeries(st.evals, f.evals); mark('loss'); }
    if (f.heat) { mergeHeat(st, f.heat, full); mark('heat'); }
    if (Array.isArray(f.comm)) { st.comm = f.comm; mark('table'); }
    if (f.timeline) { st.timeline = f.timeline; mark('timeline'); }
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

  // Heat columns by step: a column replaces the held one of its step; steps < first are dropped.
  function mergeHeat(st, h, full) {
    const byStep = new Map();
    if (!full) for (const c of st.heat.cols) byStep.set(c[0], c);
    for (const c of h.cols || []) if (Array.isArray(c)) byStep.set(c[0], c);
    const first = isNum(h.first) ? h.first : st.heat.first;
    const last = isNum(h.last) ? h.last : st.heat.last;
    const cols = [...byStep.values()].filter((c) => c[0] >= first).sort((a, b) => a[0] - b[0]);
    st.heat = { first, last, cols };
  }

  // ---- Rendering ---------------------------------------------------------------------------------
  function scheduleRender() { if (!ui.raf) ui.raf = requestAnimationFrame(() => { ui.raf = 0; render(); }); }

  // Renders at once (tests and benchmarks), instead of at the next animation frame.
  function renderNow() { if (ui.raf) cancelAnimationFrame(ui.raf); ui.raf = 0; render(); }

  // Redraws what changed since the last render and records how long that took.
  function render() {
    const t0 = performance.now();
    const d = ui.dirty;
    ui.dirty = new Set();
    // Every width is read before anything is written, so the layout is computed once.
    for (const id of CANVASES) ui.widths.set(id, Math.max(60, $(id).parentElement.clientWidth));
    const sections = [
      ['header', renderHeader], ['diagnosis', renderDiagnosis], ['replay', renderReplay],
      ['grid', renderGrid], ['loss', renderLoss], ['memory', renderMemory], ['heat', renderHeat],
      ['table', renderTable], ['timeline', renderTimeline], ['tip', refreshTip],
    ];
    for (const [name, fn] of sections) if (d.has(name)) fn();
    updateDataAttributes();
    S.frames++;
    S.frameTimes.push(performance.now() - t0);
    if (S.frameTimes.length > 200) S.frameTimes.shift();
  }

  // Sizes a canvas to its box's width and `cssH` CSS pixels at the device's pixel ratio; clears it.
  function fitCanvas(canvas, cssH) {
    const dpr = window.devicePixelRatio || 1;
    const cssW = ui.widths.get(canvas.id) || Math.max(60, canvas.parentElement.clientWidth);
    const w = Math.round(cssW * dpr);
    const h = Math.round(cssH * dpr);
    if (canvas.width !== w || canvas.height !== h) [canvas.width, canvas.height, canvas.style.height] = [w, h, `${cssH}px`];
    const ctx = canvas.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, cssW, cssH);
    ctx.font = `12px ${FONT}`;
    ctx.textBaseline = 'middle';
    return { ctx, w: cssW, h: cssH };
  }

  function emptyMessage(ctx, w, h, text) {
    [ctx.fillStyle, ctx.textAlign] = [AXIS, 'center'];
    ctx.fillText(text, w / 2, h / 2);
  }

  // A crisp 1 px line.
  function line(ctx, xa, ya, xb, yb) {
    const q = (v) => Math.round(v) + 0.5;
    ctx.beginPath(); ctx.moveTo(q(xa), q(ya)); ctx.lineTo(q(xb), q(yb)); ctx.stroke();
  }

  // A new element holding `text` (as text, never HTML).
  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    e.textContent = text;
    return e;
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

  const hasFlag = (row, f) => Array.isArray(row.flags) && row.flags.includes(f);
  const isFailed = (row) => !!row && (row.state === 'failed' || hasFlag(row, 'FAILED'));
  function stragglerRank() {
    const d = S.state.diagnosis;
    if (d && isNum(d.straggler) && d.straggler >= 0) return d.straggler;
    return S.state.ranks.findIndex((r) => r && hasFlag(r, 'STRAGGLER'));
  }

  // ---- Header, diagnosis, replay bar -------------------------------------------------------------
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
    if (lines.length) box.replaceChildren(...lines.map((t) => el('p', t))); else box.textContent = NOBODY;
    box.parentElement.classList.toggle('alert', lines.length > 0);
    const busy = Array.isArray(d.busy) ? d.busy : [];
    const neck = isNum(d.bottleneck) && d.bottleneck >= 0 ? ` — bottleneck: stage ${d.bottleneck}` : '';
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

  function showReplayPosition(t) {
    const r = S.state.replay || {};
    const dur = isNum(r.duration) ? r.duration : 0;
    $('replay-pos').textContent = `step ${isNum(r.step) ? r.step : 0} · ${(isNum(t) ? t : 0).toFixed(1)} s / ${dur.toFixed(1)} s`;
  }

  // ---- Rank grid ---------------------------------------------------------------------------------
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
    if (!job || !(job.world > 0)) { ui.grid = null; const { ctx, w, h } = fitCanvas(canvas, 120); return emptyMessage(ctx, w, h, 'no ranks yet'); }
    const L = ui.grid = gridLayout(job, ui.widths.get('rank-grid'));
    const { ctx } = fitCanvas(canvas, L.height);
    const { ranks } = S.state;
    const d = L.d;
    [ctx.fillStyle, ctx.textAlign] = [AXIS, 'left'];
    const everyBand = Math.ceil(14 / (L.bandH + L.bandGap));
    for (let p = 0; p < L.pp; p += everyBand) ctx.fillText(`pp${p}`, 2, L.oy + p * (L.bandH + L.bandGap) + Math.min(L.bandH, 20) / 2);
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
    if (L.n <= 64 && d >= 20) drawCellText(ctx, L, ranks);
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

  // Rank numbers (and the step or share below them in big cells), up to 64 ranks.
  function drawCellText(ctx, L, ranks) {
    const d = L.d;
    const mode = ui.gridColour;
    ctx.textAlign = 'center';
    for (let r = 0; r < L.n; r++) {
      const row = ranks[r];
      const v = row && mode !== 'state' ? (mode === 'wait' ? row.wait : row.comp) : null;
      const [cx, cy] = [L.xs[r] + d / 2, L.ys[r] + d / 2];
      ctx.fillStyle = isNum(v) && v > 0.5 ? '#ffffff' : '#1f2328';
      ctx.font = `600 ${Math.max(10, Math.min(16, Math.floor(d / 3.2)))}px ${FONT}`;
      if (d < 52) { ctx.fillText(String(r), cx, cy); continue; }
      ctx.fillText(String(r), cx, cy - 9);
      ctx.font = `11px ${FONT}`;
      const sub = !row ? 'not heard' : mode === 'state' ? `step ${isNum(row.step) ? row.step : '–'}`
        : `${mode === 'wait' ? 'wait' : 'comp'} ${fmtPct(v)}`;
      ctx.fillText(sub, cx, cy + 8);
    }
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

  // ---- Loss chart --------------------------------------------------------------------------------
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

  // ---- Memory per rank ---------------------------------------------------------------------------
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
    renderMemoryLegend();
    const M = memoryGroups();
    if (!M.groups.some((g) => g.count || g.planCount)) { emptyMessage(ctx, w, h, 'no memory reported yet'); return; }
    const m = { l: 66, r: 8, t: 10, b: 30 };
    const [pw, ph] = [w - m.l - m.r, h - m.t - m.b];
    const top = Math.max(1, ...M.groups.map((g) => Math.max(sum(g.meas), sum(g.plan), g.peak, g.max)));
    // Ticks in the binary unit of the largest value.
    const unit = Math.pow(1024, Math.max(0, Math.min(4, Math.floor(Math.log(top) / Math.log(1024)))));
    const yt = niceTicks(0, top / unit, 4);
    const Y = (b) => m.t + ph - (b / unit / yt.hi) * ph;
    [ctx.strokeStyle, ctx.fillStyle, ctx.textAlign] = [GRIDLINE, AXIS, 'right'];
    for (const v of yt.ticks) { line(ctx, m.l, Y(v * unit), m.l + pw, Y(v * unit)); ctx.fillText(fmtBytes(v * unit), m.l - 6, Y(v * unit)); }
    const gw = pw / M.groups.length;
    const bw = Math.max(1, M.planned ? gw * 0.38 : gw * 0.7);
    const left = (i) => m.l + i * gw + (gw - (M.planned ? 2 * bw + 1 : bw)) / 2;
    M.groups.forEach((g, i) => {
      const gx = left(i);
      if (M.planned) { ctx.globalAlpha = 0.45; stack(ctx, gx, bw, g.plan, Y); ctx.globalAlpha = 1; }
      const mx = M.planned ? gx + bw + 1 : gx;
      if (g.count) stack(ctx, mx, bw, g.meas, Y);
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
    M.groups.forEach((g, i) => { if (i % every === 0) ctx.fillText(label(g), m.l + (i + 0.5) * gw, m.t + ph + 11); });
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
      ctx.fillStyle = CAT_FILL[c % CAT_FILL.length];
      const [y0, y1] = [Y(base), Y(base + v)];
      ctx.fillRect(x, y1, bw, Math.max(0.5, y0 - y1));
      base += v;
    });
  }

  // The category legend (from job.categories) and the note on planning and binning.
  function renderMemoryLegend() {
    const { job, ranks: { length: n } } = S.state;
    const cats = job && Array.isArray(job.categories) ? job.categories : [];
    const planned = !!(job && Array.isArray(job.planned));
    const box = $('mem-legend');
    const key = JSON.stringify([cats, planned, n]);
    if (box.dataset.key === key) return;
    box.dataset.key = key;
    box.replaceChildren(...cats.map((c, i) => { const s = el('span', String(c)); s.prepend(el('i', '', `sw cat${i % CAT_FILL.length}`)); return s; }),
      el('span', '— peak total'));
    $('mem-sub').textContent = planned ? 'planned (P, pale) beside measured (M)' : 'measured';
    let note = planned ? 'Planned: parameters, gradients and optimizer state only (activations and comm are not planned). ' : '';
    if (n > MAX_MEM_BARS) {
      const bin = Math.ceil(n / MAX_MEM_BARS);
      note += `${fmtInt(n)} ranks in ${Math.ceil(n / bin)} bars of ${bin} consecutive ranks: each bar is the bin's mean ` +
        'by category, its whisker spans the smallest to the largest rank total, its tick the largest peak.';
    }
    $('mem-note').textContent = note;
  }

  // ---- Communication heat map --------------------------------------------------------------------
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
    for (let q = 0; q < vals.length; q++) px[q] = Number.isNaN(vals[q]) ? none : LUT.packed[max > 0 ? lutIndex(vals[q] / max) : 0];
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
    for (let j = 0; j < g.ncol; j += every) ctx.fillText(String(cols[j * g.colBin][0]), m.l + (j + 0.5) * g.colW, m.t + plotH + 12);
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

  // ---- Communication table -----------------------------------------------------------------------
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

  // ---- Timeline ----------------------------------------------------------------------------------
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
        ctx.fillStyle = SPAN_FILL[s[0]] || '#9ca3af';
        ctx.fillRect(x0, y, wd, laneH);
        // Inside the span when it fits: the collective's label, else the micro-batch.
        const text = s[0] === 'collective' ? String(s[4] || '') : s[0] !== 'optimizer' && s[3] >= 0 ? String(s[3]) : '';
        if (text && wd > 10 && textWidth(ctx, text) + 6 < wd) {
          ctx.fillStyle = s[0] === 'collective' ? '#1f2328' : '#ffffff';
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

  // ---- Tooltip and mouse -------------------------------------------------------------------------
  function showTip(tip, clientX, clientY) {
    const box = $('tooltip');
    if (!tip) { box.hidden = true; return; }
    const row = ([k, v, cls]) => { const d = el('div', '', `tt-row ${cls || ''}`); d.append(el('span', k), el('span', v)); return d; };
    box.replaceChildren(el('div', tip.title, 'tt-title'), ...tip.rows.map(row));
    box.hidden = false;
    const r = box.getBoundingClientRect();
    const x = clientX + 16 + r.width > window.innerWidth ? clientX - 12 - r.width : clientX + 16;
    box.style.left = `${Math.max(4, x)}px`;
    box.style.top = `${Math.max(4, Math.min(window.innerHeight - r.height - 4, clientY + 14))}px`;
  }

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

  function gridHit(x, y) {
    const L = ui.grid;
    if (!L) return -1;
    for (let r = 0; r < L.n; r++) if (x >= L.xs[r] - 1 && x < L.xs[r] + L.s && y >= L.ys[r] - 1 && y < L.ys[r] + L.s) return r;
    return -1;
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

  // ---- WebSocket ---------------------------------------------------------------------------------
  function setConnected(on) {
    S.connected = on;
    $('conn-status').textContent = on ? 'live' : 'disconnected, reconnecting…';
    $('conn-status').className = on ? 'conn-on' : 'conn-off';
  }

  // Connects to /ws; on close, shows the status and tries again after 0.5 s, 1 s, 2 s, 4 s, 5 s, ...
  function connect() {
    if (location.protocol !== 'http:' && location.protocol !== 'https:') return;  // file://: shardlab.apply
    let ws;
    try { ws = new WebSocket(`${location.protocol === 'https:' ? 'wss:' : 'ws:'}//${location.host}/ws`); } catch (e) { retry(); return; }
    net.ws = ws;
    let opened = false;
    ws.onopen = () => { opened = true; net.backoff = 500; $('auth-note').hidden = true; setConnected(true); };
    ws.onmessage = (e) => { let f = null; try { f = JSON.parse(e.data); } catch (err) { /* not a frame */ } applyFrame(f); };
    ws.onclose = () => { if (net.ws === ws) net.ws = null; setConnected(false); if (!opened) checkAuth(); retry(); };
    ws.onerror = () => {};  // a close follows
  }

  function retry() { setTimeout(connect, net.backoff); net.backoff = Math.min(5000, net.backoff * 2); }

  // A socket refused before opening may mean the sign-in is missing: then offer the login page.
  function checkAuth() {
    fetch('/api/run', { cache: 'no-store', redirect: 'manual' })
      .then((r) => { $('auth-note').hidden = !(r.status === 401 || r.status === 403 || r.type === 'opaqueredirect'); })
      .catch(() => {});
  }

  function send(cmd) { if (net.ws && net.ws.readyState === WebSocket.OPEN) net.ws.send(JSON.stringify(cmd)); }

  // ---- Controls and start-up ---------------------------------------------------------------------
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

  function start() { wireControls(); setConnected(false); markAll(); renderNow(); connect(); }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
