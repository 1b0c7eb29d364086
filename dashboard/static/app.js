// voicesvc dashboard: what every page shares. Plain JavaScript, no library:
// each page is a few forms and lists over the public API, and the session
// cookie goes with every same-origin fetch by itself.
'use strict';

const API = document.body.dataset.api;

// Messages for people, by the API's error code. Anything not here falls back
// to the server's message, which is written for people too.
const MESSAGES = {
  unauthorized: 'Your session has ended. Open a new sign-in link to continue.',
  key_expired: 'That key has expired.',
  token_invalid: 'The playback token expired or was used. Press Play again.',
  insufficient_scope: 'This session may not do that.',
  origin_not_allowed: 'This page must be opened from the dashboard itself.',
  quota_exhausted: 'This month\'s characters are used up. Usage resets on the 1st (UTC), or ask for credits.',
  insufficient_credits: 'Not enough characters left this month for that text.',
  feature_disabled: 'Your plan does not include streaming.',
  rate_limited: 'Too many requests at once. Wait a second and try again.',
  concurrency_limited: 'All your concurrent streams are busy. Try again when one finishes.',
  too_many_sessions: 'Too many realtime sessions are open. Close one and try again.',
  voice_not_ready: 'That voice is not ready yet.',
  voice_busy: 'That voice is being cloned right now.',
  consent_required: 'Please confirm that you have the speaker\'s permission.',
  file_required: 'Choose a recording to upload.',
  file_too_large: 'That recording is too large: at most 20 MiB.',
  payload_too_large: 'That is too large to send.',
  upstream_busy: 'The speech engine is busy. Try again in a moment.',
  store_unavailable: 'The service cannot reach its database right now. Try again shortly.',
  shutting_down: 'The service is restarting. Try again in a moment.',
  not_found: 'That no longer exists. The page may be out of date: reload it.',
};

// ApiError carries a message people can read, and the code for scripts.
class ApiError extends Error {
  constructor(message, code, status) { super(message); this.code = code; this.status = status; }
}

// errorFrom turns any error body of the API (envelope or flat billing body)
// into an ApiError.
function errorFrom(status, body, scope) {
  let code = '', msg = '';
  if (body && typeof body.error === 'string') { code = body.error; msg = body.message || ''; }
  else if (body && body.error === true) { code = body.code || (status === 401 ? 'unauthorized' : ''); msg = body.message || ''; }
  if (status === 401 && !code) code = 'unauthorized';
  let text = MESSAGES[code] || (msg ? msg.charAt(0).toUpperCase() + msg.slice(1) + '.' : '');
  if (code === 'insufficient_scope') text = scopeMessage(msg, scope);
  if (!text) text = status >= 500 ? 'The service had a problem. Try again in a moment.' : 'That did not work (HTTP ' + status + ').';
  if (status >= 500 && body && body.request_id) text += ' (reference ' + body.request_id + ')';
  return new ApiError(text, code, status);
}

// SCOPES: what each scope allows, for the message that names a missing one.
const SCOPES = { tts: 'speak', 'voices:read': 'list and read voices', 'voices:write': 'create, change and delete voices', clone: 'clone voices' };

// scopeFor names the scope an API call needs (docs/api.md); 'session' for
// the routes that take the dashboard session alone.
function scopeFor(method, path) {
  const p = path.split('?')[0];
  if (p.startsWith('/keys')) return 'session';
  if (p === '/voices/clone' || /^\/voices\/[^/]+\/(enroll|clone)/.test(p)) return 'clone';
  if (p.startsWith('/tokens') || /\/(speak|stream)$/.test(p)) return 'tts';
  if (p.startsWith('/voices') || p.startsWith('/jobs')) return method === 'GET' ? 'voices:read' : 'voices:write';
  return '';
}

// scopeMessage says which scope is missing: the API's message when it names
// one, else the scope the action needs.
function scopeMessage(msg, scope) {
  const named = Object.keys(SCOPES).find((k) => new RegExp('(^|[^:\\w])' + k.replace(':', '\\:') + '($|[^:\\w])').test(msg || ''));
  if (scope === 'session' || /session only/.test(msg || '')) return 'Only a dashboard session may do that, not an API key or token.';
  const need = named || scope;
  if (!need) return 'This session lacks the scope that action needs' + (msg ? ': ' + msg : '') + '.';
  return 'Missing scope "' + need + '": this session or key may not ' + SCOPES[need] +
    '. Use a key with the "' + need + '" scope, or sign in again with a new link.';
}

// api calls {api_root}{path}; it returns data, or throws an ApiError. A
// page makes a few calls at once, and small plans allow 2 requests a
// second: a call refused with 429 rate_limited waits its Retry-After and
// tries again, twice at most.
async function api(method, path, body) {
  const opt = { method, headers: {}, credentials: 'same-origin' };
  if (body instanceof FormData) opt.body = body;
  else if (body !== undefined) { opt.body = JSON.stringify(body); opt.headers['Content-Type'] = 'application/json'; }
  for (let attempt = 0; ; attempt++) {
    let res;
    try { res = await fetch(API + path, opt); }
    catch (e) { throw new ApiError('The service cannot be reached. Check your connection.', 'network', 0); }
    let json = null;
    try { json = await res.json(); } catch (e) { /* not JSON */ }
    if (res.ok) return json ? json.data : null;
    const err = errorFrom(res.status, json, scopeFor(method, path));
    if (err.code !== 'rate_limited' || attempt >= 2) throw err;
    const wait = Math.min(5, Number(res.headers.get('Retry-After')) || 1);
    await new Promise((r) => setTimeout(r, wait * 1000));
  }
}

// notice shows a message at the top of the page (role=alert); kind 'ok' for
// good news.
function notice(text, kind) {
  const el = document.getElementById('notice');
  if (!el) return;
  el.textContent = text;
  el.className = 'notice' + (kind === 'ok' ? ' ok' : '');
  el.hidden = !text;
}

// fail shows an error; a session that ended sends the person to sign in.
function fail(err) {
  notice(err && err.message ? err.message : String(err));
  if (err && err.code === 'unauthorized' && err.status === 401) {
    setTimeout(() => { location.href = '/dashboard/login'; }, 2500);
  }
}

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c);
  return e;
}

// idChip shows an id whole on one line (cut with an ellipsis when the
// space is short; the title and the copy button give all of it).
function idChip(id, what) {
  const btn = el('button', { type: 'button', class: 'copy', 'aria-label': 'Copy the id' + (what ? ' of ' + what : '') }, 'Copy');
  btn.addEventListener('click', async () => {
    let ok = false;
    try { await navigator.clipboard.writeText(id); ok = true; } catch (e) { /* below */ }
    if (!ok) {
      const t = el('textarea', { class: 'vh', readonly: true });
      t.value = id; document.body.append(t); t.select();
      try { ok = document.execCommand('copy'); } catch (e) { /* */ }
      t.remove();
    }
    btn.textContent = ok ? 'Copied' : 'Select it';
    setTimeout(() => { btn.textContent = 'Copy'; }, 2000);
  });
  return el('span', { class: 'idchip' }, el('code', { class: 'id', title: id, text: id }), btn);
}

// Ids written by the server into the page get the same treatment.
for (const c of document.querySelectorAll('code.id:not(.idchip code)')) {
  const chip = idChip(c.textContent);
  c.replaceWith(chip);
}

function fmtNum(n) { return Number(n).toLocaleString('en'); }
function fmtTime(ms) { return ms ? new Date(ms).toISOString().slice(0, 16).replace('T', ' ') + ' UTC' : 'never'; }

window.vs = { api, notice, fail, el, fmtNum, fmtTime, ApiError, errorFrom, idChip };
