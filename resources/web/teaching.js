// ShardLab dashboard, the teaching bar: for a teaching run (the frames' "teaching" section, not
// null) a banner saying the run is paused on purpose and after which phase, with Next phase, Next
// step and Run, which the server hands to the run's gate ({"cmd":"teach","do":...}). Hidden for any
// other run. The banner's words come with the frame (the engine's teaching_banner, which the
// desktop app's bar shows too).
import { $, isNum } from './draw.js';
import { S } from './state.js';
import { send } from './socket.js';

function renderTeaching() {
  const t = S.state.teaching;
  const bar = $('teaching-bar');
  const live = S.state.job && S.state.job.mode !== 'replay';
  bar.hidden = !(t && typeof t === 'object' && live);
  if (bar.hidden) return;
  $('teaching-banner').textContent = String(t.banner || '');
  for (const id of ['teach-next-phase', 'teach-next-step', 'teach-run']) $(id).disabled = !!t.free;
  bar.dataset.paused = String(!!t.paused);
  bar.dataset.phases = String(isNum(t.phases) ? t.phases : 0);
}

function wireTeaching() {
  const go = (what) => () => send({ cmd: 'teach', do: what });
  $('teach-next-phase').addEventListener('click', go('next_phase'));
  $('teach-next-step').addEventListener('click', go('next_step'));
  $('teach-run').addEventListener('click', go('run'));
}

export { renderTeaching, wireTeaching };
