// ShardLab dashboard, "one step, phase by phase": the scrubber over the "Who holds what" strips.
// The frames' `step` section (net/web/step_json.h) is the newest step every rank completed, frame
// by frame (forward, backward, each collective, the update); the scrubber picks one frame and the
// strips light up what it touches: on each rank taking part, on the touched lane(s) (an
// optimizer_state touch on every state-array lane), the touched ranges at their true offsets as
// bands over the lane's top third (send, read) or bottom third (receive, write), the held ranges
// still showing in the middle; ranks not in the frame are dimmed. It follows each new step
// ("live") until the viewer moves the slider, clicks ◀/▶ or presses Left/Right on the bar; "live"
// follows again.
// What it shows is window.shardlab.step ({index, title, live, step, frames}) and, drawn by
// holdings.js through drawHighlights, window.shardlab.holdings.highlights
// ([{rank, lane, role, x: [[x0, x1], ...] in canvas CSS px, ranges: [[b, e], ...], y0, y1}]).
import { $, isNum, fmtInt, fmtSeconds, fmtRanks } from './draw.js';
import { S, mark, scheduleRender } from './state.js';

// A role's colour and band: top third for what leaves or is read, bottom third for what arrives or
// is written (the style sheet's .hl-* swatches are the same).
const ROLES = {
  send: { colour: '#dc2626', band: 'top' },
  read: { colour: '#111827', band: 'top' },
  receive: { colour: '#4338ca', band: 'bottom' },
  write: { colour: '#db2777', band: 'bottom' },
};
const DIM = 'rgba(255, 255, 255, 0.7)';  // over the strip of a rank not in the frame
const view = { index: 0, live: true, pinned: null };  // pinned: the step section held while not live

// The step section shown: the newest while live, else the one held when the viewer took over.
function shown() {
  const s = view.live ? S.state.step : view.pinned;
  return s && typeof s === 'object' ? s : null;
}

function framesOf(s) {
  return s && isNum(s.step) && s.step > 0 && Array.isArray(s.frames) ? s.frames : [];
}

// The frame the strips light up, or null (no step, or step 0).
function currentFrame() {
  const frames = framesOf(shown());
  if (!frames.length) return null;
  return frames[Math.min(frames.length - 1, Math.max(0, view.index))] || null;
}

function go(index, live = false) {
  if (!live && view.live) view.pinned = S.state.step;
  view.live = live;
  const n = framesOf(shown()).length;
  view.index = Math.min(Math.max(0, n - 1), Math.max(0, index | 0));
  mark('holdings');
  scheduleRender();
}

// The scrubber's controls and words; window.shardlab.step.
function renderStep() {
  const s = shown();
  const frames = framesOf(s);
  const n = frames.length;
  if (view.index > n - 1) view.index = Math.max(0, n - 1);
  const f = n ? frames[view.index] : null;
  const slider = $('step-slider');
  [slider.min, slider.max, slider.value] = ['0', String(Math.max(0, n - 1)), String(view.index)];
  slider.disabled = !n;
  $('step-prev').disabled = !n || view.index <= 0;
  $('step-next').disabled = !n || view.index >= n - 1;
  $('step-live').disabled = view.live;
  $('step-live').classList.toggle('on', view.live);
  $('step-replay').classList.toggle('disabled', !n);
  if (!f) {
    $('step-label').textContent = s && isNum(s.step) && s.step > 0 ? `step ${fmtInt(s.step)}: no frames`
      : 'no step to replay';
    $('step-title').textContent = s && s.note ? s.note : 'No complete step yet: every rank must finish one.';
    $('step-explain').textContent = '';
    S.step = { index: -1, title: '', live: view.live, step: s && isNum(s.step) ? s.step : 0, frames: 0 };
    return;
  }
  $('step-label').textContent = `step ${fmtInt(s.step)}${view.live ? ' (live)' : ''} · frame ${view.index + 1} of ${n}`
    + (s.truncated ? ' (later frames left out)' : '');
  const ranks = (Array.isArray(f.ranks) ? f.ranks : []).map((r) => r.rank).filter(isNum).sort((a, b) => a - b);
  const dur = isNum(f.start) && isNum(f.end) ? fmtSeconds(f.end - f.start) : '–';
  $('step-title').textContent = `${f.title} · rank${ranks.length === 1 ? '' : 's'} ${fmtRanks(ranks)} · ${dur}`;
  $('step-explain').textContent = f.explain || '';
  S.step = { index: view.index, title: String(f.title || ''), live: view.live, step: s.step, frames: n };
}

// Dims the strips of ranks not in the frame and draws the frame's touches over the lanes; returns
// the highlights drawn. strips: holdings.js's [{rank, entry, lanes: [{lane, cat}], y, h}], laneY(s,
// k) the top of lane k, laneH its height, X the axis, w the canvas's CSS width.
function drawHighlights(ctx, strips, laneY, laneH, X, w) {
  const f = currentFrame();
  const out = [];
  if (!f) return out;
  const byRank = new Map((Array.isArray(f.ranks) ? f.ranks : []).filter((r) => r && isNum(r.rank))
    .map((r) => [r.rank, r]));
  const band = Math.max(1, Math.round(laneH / 3));
  for (const s of strips) {
    const fr = byRank.get(s.rank);
    if (!fr) {
      if (byRank.size) { ctx.fillStyle = DIM; ctx.fillRect(0, s.y - 2, w, s.h + 4); }
      continue;
    }
    if (!s.entry) continue;
    for (const t of Array.isArray(fr.touches) ? fr.touches : []) {
      const style = ROLES[t.role];
      if (!style || !Array.isArray(t.ranges)) continue;
      const ranges = t.ranges.filter((r) => Array.isArray(r) && isNum(r[0]) && isNum(r[1]) && r[1] > r[0]);
      s.lanes.forEach((ln, k) => {
        if (!(t.lane === 'optimizer_state' ? ln.cat === 'optimizer_state' : ln.lane === t.lane)) return;
        const ly = laneY(s, k);
        const y0 = style.band === 'top' ? ly : ly + laneH - band;
        ctx.fillStyle = style.colour;
        const xs = ranges.map(([b, e]) => [X(b), X(e)]);
        for (const [xa, xb] of xs) ctx.fillRect(xa, y0, Math.max(1, xb - xa), band);
        out.push({ rank: s.rank, lane: ln.lane, role: t.role, x: xs, ranges: ranges.map(([b, e]) => [b, e]),
          y0, y1: y0 + band });
      });
    }
  }
  return out;
}

function wireStep() {
  $('step-prev').addEventListener('click', () => go(view.index - 1));
  $('step-next').addEventListener('click', () => go(view.index + 1));
  $('step-live').addEventListener('click', () => go(view.index, true));
  $('step-slider').addEventListener('input', (e) => go(Number(e.target.value)));
  // Left and Right anywhere on the bar, as in the app (the slider moves itself on them).
  $('step-replay').addEventListener('keydown', (e) => {
    if (e.target === $('step-slider') || e.altKey || e.ctrlKey || e.metaKey) return;
    const by = { ArrowLeft: -1, ArrowRight: 1 }[e.key];
    if (!by || !framesOf(shown()).length) return;
    e.preventDefault();
    go(view.index + by);
  });
}

export { renderStep, wireStep, drawHighlights, currentFrame, ROLES };
