// ShardLab dashboard, the teaching bar: for a teaching run (the frames' "teaching" section, not
// null) a banner saying the run is paused on purpose and after which phase, with Next phase, Next
// step and Run, which the server hands to the run's gate ({"cmd":"teach","do":...}). Hidden for any
// other run. The same words as the desktop app's bar (gui/teaching_bar.cpp).
import { $, isNum } from './draw.js';
import { S } from './state.js';
import { send } from './socket.js';

// The banner's words for the gate's state.
function bannerText(t) {
  if (t.free) return `Teaching mode: the run goes on (${String(t.why_free || '')})`;
  const step = isNum(t.step) ? t.step : 0;
  if (t.paused) {
    const where = t.last_phase === 'optimizer' ? `the update of step ${step}`
      : `the ${String(t.last_phase || 'phase')} of step ${step + 1}`;
    return `Paused on purpose after ${where}: every rank is held until you step on (Next phase, Next step, or Run)`;
  }
  if (!t.phases && !t.held) return 'Teaching mode: the ranks are setting up';
  return `Teaching mode: running to the next stop (${isNum(t.held) ? t.held : 0} of the ranks held)`;
}

function renderTeaching() {
  const t = S.state.teaching;
  const bar = $('teaching-bar');
  const live = S.state.job && S.state.job.mode !== 'replay';
  bar.hidden = !(t && typeof t === 'object' && live);
  if (bar.hidden) return;
  $('teaching-banner').textContent = bannerText(t);
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

export { renderTeaching, wireTeaching, bannerText };
