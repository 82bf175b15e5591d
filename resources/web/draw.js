// ShardLab pages, shared drawing helpers: the colours every view uses (the run's meanings from
// /palette.js, the one table the desktop app draws with too), number/byte/second formatting, axis
// ticks, the Purples colour ramp, canvas sizing at the device's pixel ratio, and the tooltip box.
// An ES module: the dashboard's modules and plan.js import what they use from here.
import { PALETTE } from './palette.js';

// ---- Colours shared by several views ------------------------------------------------------------
// The legends' swatches read the palette as CSS custom properties (applyPalette).
const STRAGGLER = PALETTE.rank.straggler;  // rank flag: the grid's ring, the heat map's row marker
const [AXIS, GRIDLINE] = ['#6b7280', '#eceef1'];
const FONT = 'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif';
// ColorBrewer "Purples", light (low) to dark (high): the heat map and the grid's share colouring.
const PURPLES = ['#efedf5', '#dadaeb', '#bcbddc', '#9e9ac8', '#807dba', '#6a51a3', '#54278f', '#3f007d'];
const $ = (id) => document.getElementById(id);
// Each canvas's CSS width as measured by the dashboard's last render (fitCanvas reads it).
const widths = new Map();

// Sets `--GROUP-NAME` on the document's root for every colour of `colours` ({group: {name: hex}}),
// for the style sheet's legend swatches: PALETTE by default.
function applyPalette(colours = PALETTE) {
  const root = document.documentElement.style;
  for (const [group, named] of Object.entries(colours)) {
    for (const [name, hex] of Object.entries(named)) root.setProperty(`--${group}-${name}`, hex);
  }
}

const rgbOf = (hex) => [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
const hexOf = (c) => `#${c.map((u) => Math.max(0, Math.min(255, Math.round(u))).toString(16).padStart(2, '0')).join('')}`;

// A shade of `hex` ("#rrggbb"): its channels times `k`, below 1 darker, above 1 lighter (the HSV
// value scaled, as QColor's darker and lighter in the app while no channel passes 255).
const shade = (hex, k) => hexOf(rgbOf(hex).map((u) => u * k));

// A pale tint of `hex`: mixed with white, `f` = 0 itself, 1 white.
const tint = (hex, f) => hexOf(rgbOf(hex).map((u) => u + (255 - u) * f));

// Dark or white text, whichever reads better on `hex`.
function inkOn(hex) {
  const [r, g, b] = rgbOf(hex).map((u) => u / 255);
  return 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.5 ? '#1f2328' : '#ffffff';
}

// ---- Formatting ---------------------------------------------------------------------------------
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
const LUT = buildLut();

// ---- Canvas and DOM -----------------------------------------------------------------------------
// Sizes a canvas to its box's width (as measured by the last render, see dashboard.js) and `cssH`
// CSS pixels at the device's pixel ratio; clears it.
function fitCanvas(canvas, cssH) {
  const dpr = window.devicePixelRatio || 1;
  const cssW = widths.get(canvas.id) || Math.max(60, canvas.parentElement.clientWidth);
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

// ---- Tooltip ------------------------------------------------------------------------------------
// Shows {title, rows: [[key, value, class?], ...]} next to the mouse, or hides the box (tip null).
function showTip(tip, clientX, clientY) {
  const box = $('tooltip');
  if (!tip) { box.hidden = true; return; }
  const row = ([k, v, cls]) => {
    const d = el('div', '', `tt-row ${cls || ''}`);
    d.append(el('span', k), el('span', v));
    return d;
  };
  box.replaceChildren(el('div', tip.title, 'tt-title'), ...tip.rows.map(row));
  box.hidden = false;
  const r = box.getBoundingClientRect();
  const x = clientX + 16 + r.width > window.innerWidth ? clientX - 12 - r.width : clientX + 16;
  box.style.left = `${Math.max(4, x)}px`;
  box.style.top = `${Math.max(4, Math.min(window.innerHeight - r.height - 4, clientY + 14))}px`;
}

export {
  PALETTE, STRAGGLER, AXIS, GRIDLINE, FONT, LUT, lutIndex, $, widths, applyPalette, shade, tint, inkOn, isNum, fmtInt,
  fmtPct, sum, fmtBytes, fmtSeconds, fmtRanks, niceTicks, fitCanvas, emptyMessage, line, el, showTip,
};
