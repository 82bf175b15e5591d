// ShardLab plan page (/plan): a what-if form over the engine's planner. The choices come from
// /api/plan/presets (model presets with their sizes, GPUs), the answer from /api/plan (the fields of
// `shardlab plan --json`): the ranked layouts as a table, and for the selected row the memory per
// pipeline stage against the usable share and the GPU's HBM, the step's time split, MFU and why.
// The page's one module (plan.html loads it): draw.js's helpers and the palette's colours, the
// same as the dashboard's and the desktop app's Plan tab; every string from the server goes in
// through textContent.
// Hooks for tests: #plan-table data-rows, #plan-memory data-stages, window.shardlabPlan.
import { PALETTE, $, el, isNum, niceTicks, line, showTip, shade, inkOn, applyPalette, AXIS, GRIDLINE, FONT } from './draw.js';

const SIZES = ['layers', 'hidden', 'heads', 'ffn', 'seq', 'vocab'];
const MEM = ['params', 'grads', 'optimizer_state', 'activations', 'comm'];
// The step's parts, in the timeline's colours as in the desktop app: compute as a forward, the
// three kinds of communication as collectives (a shade each), the bubble as idle time.
const SPAN = PALETTE.span;
const TIME = [['compute', SPAN.forward], ['tp', shade(SPAN.collective, 1 / 1.3)], ['pp', SPAN.collective],
  ['dp', shade(SPAN.collective, 1.35)], ['bubble', SPAN.idle], ['optimizer', SPAN.optimizer]];
const [USABLE, HBM] = [PALETTE.limit.usable, PALETTE.limit.hbm];

const P = window.shardlabPlan = { presets: null, doc: null, selected: 0, requests: 0 };
let memBars = [];  // [x0, x1, stage] of the drawn bars, for the tooltip

// ---- Formatting ---------------------------------------------------------------------------------
const fixed = (x, d) => (isNum(x) ? x.toFixed(d) : '–');
const secs = (s) => (isNum(s) ? `${s.toFixed(s < 0.1 ? 3 : 2)} s` : '–');
const params = (n) => (n >= 1e12 ? `${(n / 1e12).toFixed(2)} T` : `${(n / 1e9).toFixed(1)} B`);
const gib = (x) => (isNum(x) ? `${x.toFixed(x < 10 ? 2 : 1)} GiB` : '–');
const layoutText = (l) => `pp ${l.pp} × tp ${l.tp} × dp ${l.dp}, micro-batch ${l.micro_batch}` +
  `${l.interleave > 1 ? `, interleave ${l.interleave}` : ''}, ZeRO-${l.zero}, recompute ${l.recompute}` +
  `${l.sequence_parallel ? ', sequence parallel' : ''}`;

// The memory categories' colours: the palette's (the legend's .mem-* swatches read the same).
function memColours() {
  return MEM.map((k) => PALETTE.memory[k]);
}

// A canvas as wide as its box and `cssH` high at the device's pixel ratio, cleared.
function fit(canvas, cssH) {
  const dpr = window.devicePixelRatio || 1;
  const w = Math.max(120, canvas.parentElement.clientWidth);
  [canvas.width, canvas.height, canvas.style.height] = [Math.round(w * dpr), Math.round(cssH * dpr), `${cssH}px`];
  const ctx = canvas.getContext('2d');
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.font = `12px ${FONT}`;
  ctx.textBaseline = 'middle';
  return { ctx, w, h: cssH };
}

// ---- The form -----------------------------------------------------------------------------------
function presetOf(name) {
  return (P.presets && P.presets.models.find((m) => m.name === name)) || null;
}

function showPreset() {
  const form = $('plan-form');
  const m = presetOf(form.elements.model.value);
  for (const f of SIZES) {
    form.elements[f].value = m ? String(m[f]) : '';
    form.elements[f].placeholder = f === 'ffn' ? '4 × hidden' : m ? '' : 'required';
  }
  $('plan-model-source').textContent = m ? m.source : 'give the sizes';
}

// The query: every filled field; a preset's sizes only where they were changed (overrides).
function query() {
  const form = $('plan-form');
  const m = presetOf(form.elements.model.value);
  const q = new URLSearchParams();
  for (const e of form.elements) {
    if (!e.name) continue;
    if (e.type === 'checkbox') { if (e.checked) q.set(e.name, e.value); continue; }
    const v = e.value.trim();
    if (v === '' || (m && SIZES.includes(e.name) && String(m[e.name]) === v)) continue;
    q.set(e.name, v);
  }
  return q;
}

// Fills the form from a query (the page's own URL, so a plan can be shared).
function fillForm(q) {
  const form = $('plan-form');
  form.elements.model.value = q.get('model') || 'gpt';
  showPreset();
  for (const [k, v] of q) {
    const e = form.elements[k];
    if (!e || k === 'model') continue;
    if (e.type === 'checkbox') e.checked = v !== '0' && v !== 'false'; else e.value = v;
  }
}

function showError(text) {
  $('plan-error').textContent = text || '';
  $('plan-error').hidden = !text;
}

async function getJson(url) {
  const res = await fetch(url, { headers: { Accept: 'application/json' } });
  if (res.status === 401) throw new Error('this dashboard needs the job\'s token: sign in at /login first');
  let body = null;
  try { body = await res.json(); } catch (e) { /* not JSON: the status says it */ }
  if (!res.ok) throw new Error((body && body.error) || `the server answered ${res.status} ${res.statusText}`);
  if (!body) throw new Error('the server\'s answer was not JSON');
  return body;
}

async function loadPresets() {
  const p = await getJson('/api/plan/presets');
  P.presets = p;
  const model = $('plan-model');
  model.append(...p.models.map((m) => { const o = el('option', m.name); o.value = m.name; return o; }));
  model.value = presetOf('gpt3-175b') ? 'gpt3-175b' : model.options[model.options.length - 1].value;
  $('plan-gpu').replaceChildren(...p.gpus.map((g) => { const o = el('option', g); o.value = g; return o; }));
  showPreset();
}

async function plan() {
  const q = query();
  const mine = ++P.requests;
  $('plan-go').disabled = true;
  $('plan-status').textContent = 'searching…';
  const t0 = performance.now();
  try {
    const doc = await getJson(`/api/plan?${q}`);
    if (mine !== P.requests) return;
    showError('');
    P.doc = doc;
    P.selected = 0;
    $('plan-status').textContent = `${doc.searched.toLocaleString('en-US')} layouts searched in ` +
      `${((performance.now() - t0) / 1000).toFixed(2)} s`;
    history.replaceState(null, '', `/plan?${q}`);
    render();
  } catch (e) {
    if (mine !== P.requests) return;
    // The last answer no longer matches the form: only the error stays.
    P.doc = null;
    for (const id of ['plan-results', 'plan-mem-panel', 'plan-time-panel']) $(id).hidden = true;
    showError(e.message);
    $('plan-status').textContent = '';
  } finally {
    if (mine === P.requests) $('plan-go').disabled = false;
  }
}

// ---- The results --------------------------------------------------------------------------------
function render() {
  const doc = P.doc;
  if (!doc) return;
  for (const id of ['plan-results', 'plan-mem-panel', 'plan-time-panel']) $(id).hidden = false;
  const g = doc.cluster.gpu;
  $('plan-summary').textContent = `best first · ${doc.model.layers} layers, hidden ${doc.model.hidden}: ` +
    `${params(doc.model.parameters)} parameters · ${doc.gpus} × ${g.name} ` +
    `(${doc.cluster.gpus_per_node} per node) · global batch ${doc.global_batch}`;
  renderTable(doc);
  renderSelected();
}

function renderTable(doc) {
  const rows = doc.plans.map((p, i) => {
    const l = p.layout;
    const cells = [i + 1, l.pp, l.tp, l.dp, l.micro_batch, l.interleave, l.zero, l.recompute,
      l.sequence_parallel ? 'yes' : 'no', fixed(p.memory_gib_per_gpu.total, 1), fixed(p.step_seconds, 2),
      fixed(p.tflops_per_gpu, 1), `${fixed(p.mfu * 100, 1)}%`];
    const tr = el('tr', '');
    tr.dataset.index = String(i);
    tr.append(...cells.map((c) => el('td', String(c))), el('td', p.fits ? 'yes' : 'no', p.fits ? 'yes' : 'no'));
    tr.addEventListener('click', () => { P.selected = i; renderSelected(); });
    return tr;
  });
  $('plan-table').querySelector('tbody').replaceChildren(...rows);
  $('plan-table').dataset.rows = String(rows.length);
  $('plan-any-fits').textContent = !doc.plans.length ? 'No layout of these GPUs makes this job.'
    : doc.any_fits ? 'Click a row to see its memory and time.'
      : 'No layout fits in the GPUs\' memory: the closest are shown.';
}

function renderSelected() {
  const doc = P.doc;
  const p = doc && doc.plans[P.selected];
  for (const tr of $('plan-table').querySelectorAll('tbody tr')) tr.classList.toggle('sel', tr.dataset.index === String(P.selected));
  if (!p) { $('plan-mem-panel').hidden = $('plan-time-panel').hidden = true; return; }
  const label = `layout ${P.selected + 1}: ${layoutText(p.layout)}`;
  $('plan-mem-sub').textContent = label;
  $('plan-time-sub').textContent = `layout ${P.selected + 1}`;
  renderMemory(p, doc.cluster.gpu.hbm_gib);
  renderTime(p);
  const fig = (k, v) => { const s = el('span', `${k} `); s.append(el('b', v)); return s; };
  $('plan-figures').replaceChildren(
    fig('step', secs(p.step_seconds)),
    fig('MFU', `${fixed(p.mfu * 100, 1)}%`),
    fig('model TFLOP/s per GPU', fixed(p.tflops_per_gpu, 1)),
    fig('with recomputation', fixed(p.hw_tflops_per_gpu, 1)),
    fig('micro-batches per step', String(p.micro_batches)),
    fig(`fullest stage ${p.fullest_stage}`, `${fixed(p.memory_gib_per_gpu.total, 1)} of ${doc.cluster.gpu.hbm_gib} GiB`));
  $('plan-why').textContent = p.why;
  $('plan-left-out').textContent = doc.left_out;
  // The layout as a job file this machine runs (engine/plan/layout_as_job.h), to download.
  const link = $('plan-job');
  link.href = 'data:application/json;charset=utf-8,' + encodeURIComponent(JSON.stringify(p.job, null, 2) + '\n');
  link.download = `${p.job.name}.json`;
  $('plan-job-changes').textContent = p.job_changes.length
    ? `at this machine's scale: ${p.job_changes.join('; ')}` : '';
}

// Stacked bars, one per pipeline stage, against the usable share (dashed) and the HBM (red).
function renderMemory(p, hbm) {
  const canvas = $('plan-memory');
  const { ctx, w, h } = fit(canvas, 300);
  const stages = p.stage_gib;
  canvas.dataset.stages = String(stages.length);
  const colours = memColours();
  const m = { l: 58, r: 12, t: 14, b: 34 };
  const [pw, ph] = [w - m.l - m.r, h - m.t - m.b];
  const top = Math.max(hbm, ...stages.map((s) => s.total)) * 1.06;
  const yt = niceTicks(0, top, 5);
  const Y = (v) => m.t + ph - (v / yt.hi) * ph;
  [ctx.strokeStyle, ctx.fillStyle, ctx.textAlign, ctx.lineWidth] = [GRIDLINE, AXIS, 'right', 1];
  for (const v of yt.ticks) { line(ctx, m.l, Y(v), m.l + pw, Y(v)); ctx.fillText(`${v} GiB`, m.l - 6, Y(v)); }
  const gw = pw / stages.length;
  const bw = Math.max(1, Math.min(72, gw * 0.7));
  memBars = [];
  stages.forEach((s, i) => {
    const x = m.l + i * gw + (gw - bw) / 2;
    let base = 0;
    MEM.forEach((k, c) => {
      if (!(s[k] > 0)) return;
      ctx.fillStyle = colours[c];
      ctx.fillRect(x, Y(base + s[k]), bw, Math.max(0.5, Y(base) - Y(base + s[k])));
      base += s[k];
    });
    memBars.push([m.l + i * gw, m.l + (i + 1) * gw, i]);
    if (gw >= 40) { [ctx.fillStyle, ctx.textAlign] = ['#374151', 'center']; ctx.fillText(fixed(s.total, 1), x + bw / 2, Y(s.total) - 8); }
  });
  // The two limits, labelled at the right above their lines (the usable one below, when close).
  const limit = (v, colour, dash, text, below) => {
    [ctx.strokeStyle, ctx.lineWidth] = [colour, 1.5];
    ctx.setLineDash(dash);
    line(ctx, m.l, Y(v), m.l + pw, Y(v));
    ctx.setLineDash([]);
    const tw = ctx.measureText(text).width;
    const ty = Y(v) + (below ? 9 : -9);
    [ctx.fillStyle, ctx.textAlign] = ['rgba(255,255,255,0.85)', 'right'];
    ctx.fillRect(m.l + pw - tw - 6, ty - 7, tw + 4, 14);
    ctx.fillStyle = colour;
    ctx.fillText(text, m.l + pw - 4, ty);
  };
  limit(hbm, HBM, [], `HBM ${hbm} GiB`, false);
  limit(p.usable_gib, USABLE, [5, 4], `usable ${p.usable_gib} GiB`, Y(p.usable_gib) - Y(hbm) < 20);
  // Stage numbers, as many as fit.
  [ctx.fillStyle, ctx.textAlign] = [AXIS, 'center'];
  const every = Math.max(1, Math.ceil((ctx.measureText(String(stages.length - 1)).width + 10) / gw));
  stages.forEach((_, i) => { if (i % every === 0) ctx.fillText(String(i), m.l + (i + 0.5) * gw, m.t + ph + 11); });
  ctx.fillText('pipeline stage', m.l + pw / 2, m.t + ph + 26);
}

// One stacked horizontal bar: the step's seconds by part, with an axis in seconds.
function renderTime(p) {
  const { ctx, w, h } = fit($('plan-time'), 92);
  const t = p.time_seconds;
  const m = { l: 10, r: 18, t: 8, b: 30 };
  const pw = w - m.l - m.r;
  const total = TIME.reduce((s, [k]) => s + (t[k] > 0 ? t[k] : 0), 0);
  const xt = niceTicks(0, Math.max(total, 1e-9), Math.max(2, Math.floor(pw / 80)));
  const X = (s) => m.l + (s / xt.hi) * pw;
  const [y0, bh] = [m.t, h - m.t - m.b];
  let at = 0;
  for (const [k, colour] of TIME) {
    const v = t[k] > 0 ? t[k] : 0;
    if (!v) continue;
    ctx.fillStyle = colour;
    ctx.fillRect(X(at), y0, Math.max(1, X(at + v) - X(at)), bh);
    const text = `${k} ${secs(v)}`;
    if (X(at + v) - X(at) > ctx.measureText(text).width + 8) {
      [ctx.fillStyle, ctx.textAlign] = [inkOn(colour), 'center'];
      ctx.fillText(text, (X(at) + X(at + v)) / 2, y0 + bh / 2);
    }
    at += v;
  }
  // The step's total at the bar's end, where it fits.
  const end = secs(total);
  [ctx.fillStyle, ctx.textAlign] = ['#1f2328', 'left'];
  if (X(total) + 8 + ctx.measureText(end).width <= w) ctx.fillText(end, X(total) + 6, y0 + bh / 2);
  [ctx.strokeStyle, ctx.fillStyle, ctx.textAlign, ctx.lineWidth] = [AXIS, AXIS, 'center', 1];
  line(ctx, m.l, y0 + bh + 2, m.l + pw, y0 + bh + 2);
  for (const s of xt.ticks) {
    line(ctx, X(s), y0 + bh + 2, X(s), y0 + bh + 6);
    ctx.textAlign = s === 0 ? 'left' : 'center';
    ctx.fillText(`${+s.toPrecision(6)} s`, Math.min(X(s), w - 16), y0 + bh + 16);
  }
  $('plan-time-legend').replaceChildren(...TIME.map(([k, colour]) => {
    const s = el('span', `${k} ${secs(t[k])}`);
    const sw = el('i', '', 'sw');
    sw.style.background = colour;
    s.prepend(sw);
    return s;
  }));
}

// The memory chart's tooltip: the stage's categories.
function memoryTip(ev) {
  const p = P.doc && P.doc.plans[P.selected];
  const r = $('plan-memory').getBoundingClientRect();
  const hit = memBars.find(([a, b]) => ev.clientX - r.left >= a && ev.clientX - r.left < b);
  if (!p || !hit) { showTip(null); return; }
  const s = p.stage_gib[hit[2]];
  showTip({ title: `stage ${hit[2]}`, rows: MEM.map((k) => [k, gib(s[k])]).concat([['total', gib(s.total)]]) },
    ev.clientX, ev.clientY);
}

// ---- Start --------------------------------------------------------------------------------------
applyPalette();
let resizeFrame = 0;
window.addEventListener('resize', () => {
  cancelAnimationFrame(resizeFrame);
  resizeFrame = requestAnimationFrame(() => { if (P.doc) renderSelected(); });
});
$('plan-memory').addEventListener('mousemove', memoryTip);
$('plan-memory').addEventListener('mouseleave', () => showTip(null));
$('plan-model').addEventListener('change', showPreset);
$('plan-form').addEventListener('submit', (ev) => { ev.preventDefault(); plan(); });
loadPresets().then(() => {
  const q = new URLSearchParams(location.search);
  if ([...q.keys()].length) { fillForm(q); plan(); }
}).catch((e) => showError(`the choices did not load: ${e.message}`));
