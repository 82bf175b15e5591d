// ShardLab dashboard, the WebSocket: connects to /ws, applies every frame it brings (state.js),
// shows the connection in the header, reconnects by itself with back-off, offers the sign-in page
// when the socket is refused for want of the token, and sends the replay's commands.
import { $ } from './draw.js';
import { S, applyFrame } from './state.js';

const net = { ws: null, backoff: 500 };

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

export { setConnected, connect, send };
