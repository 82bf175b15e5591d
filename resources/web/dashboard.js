// ShardLab live dashboard: applies the server's "full" and "delta" frames (wire format version 1,
// README.md) to one merged state and redraws what changed, at most once per animation frame, on
// <canvas>. No libraries, no build step; every string from the server goes in through textContent.
// This file: the state, applying frames, render scheduling, window.shardlab, the header, diagnosis
// and replay bar, and the WebSocket. The views are in rank_grid.js, charts.js (loss, memory) and
// comm_views.js (heat map, table, timeline); the helpers in draw.js; mouse, buttons and start-up in
// controls.js (loaded last).
'use strict';

(() => {
  const SL = window.ShardLab = window.ShardLab || {};
  const { $, isNum, fmtInt, fmtPct, el } = SL;

  const CANVASES = ['rank-grid', 'loss-chart', 'memory-chart', 'heat-map', 'timeline'];
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

  function emptyState() {
    return { frame: 0, now: 0, job: null, replay: null, ranks: [], diagnosis: { straggler: -1, lines: [], busy: [] },
      loss: [], evals: [], heat: { first: 0, last: 0, cols: [] }, comm: [], timeline: null };
  }

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

  // ---- Rendering ---------------------------------------------------------------------------------
  function scheduleRender() { if (!ui.raf) ui.raf = requestAnimationFrame(() => { ui.raf = 0; render(); }); }

  // Renders at once (tests and benchmarks), instead of at the next animation frame.
  function renderNow() { if (ui.raf) cancelAnimationFrame(ui.raf); ui.raf = 0; render(); }

  // Redraws what changed since the last render and records how long that took. The views' render
  // functions are looked up in window.ShardLab here, as their files load after this one.
  function render() {
    const t0 = performance.now();
    const d = ui.dirty;
    ui.dirty = new Set();
    // Every width is read before anything is written, so the layout is computed once.
    for (const id of CANVASES) ui.widths.set(id, Math.max(60, $(id).parentElement.clientWidth));
    const sections = [
      ['header', renderHeader], ['diagnosis', renderDiagnosis], ['replay', renderReplay],
      ['grid', SL.renderGrid], ['loss', SL.renderLoss], ['memory', SL.renderMemory], ['heat', SL.renderHeat],
      ['table', SL.renderTable], ['timeline', SL.renderTimeline], ['tip', SL.refreshTip],
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

  function showReplayPosition(t) {
    const r = S.state.replay || {};
    const dur = isNum(r.duration) ? r.duration : 0;
    const at = (isNum(t) ? t : 0).toFixed(1);
    $('replay-pos').textContent = `step ${isNum(r.step) ? r.step : 0} · ${at} s / ${dur.toFixed(1)} s`;
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
    const url = `${location.protocol === 'https:' ? 'wss:' : 'ws:'}//${location.host}/ws`;
    try { ws = new WebSocket(url); } catch (e) { retry(); return; }
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

  Object.assign(SL, {
    S, ui, mark, markAll, scheduleRender, renderNow, hasFlag, isFailed, stragglerRank, showReplayPosition,
    setConnected, connect, send,
  });
})();
