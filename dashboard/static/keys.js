// API keys: create (the secret is shown once), list, revoke.
'use strict';
(function () {
  const { api, notice, fail, el, fmtTime, idChip } = window.vs;
  const rows = document.getElementById('key-rows');

  function status(k) {
    if (k.revoked_at) return 'revoked ' + fmtTime(k.revoked_at);
    if (k.expires_at && k.expires_at <= Date.now()) return 'expired';
    return 'active';
  }

  function row(k) {
    const dead = !!k.revoked_at || (k.expires_at && k.expires_at <= Date.now());
    const name = k.name || '(unnamed)';
    const revoke = dead ? '' : el('button', { type: 'button', class: 'danger', 'aria-label': 'Revoke key ' + name,
      onclick: () => revokeKey(k, name) }, 'Revoke');
    // data-label names each cell where the table stacks (narrow screens).
    return el('tr', { 'data-key-id': k.id },
      el('td', { class: dead ? 'revoked' : null, 'data-label': 'Name' }, el('div', {}, name, el('br'), idChip(k.id, 'key ' + name))),
      el('td', { 'data-label': 'Scopes', text: k.legacy ? 'all (legacy)' : k.scopes.join(', ') }),
      el('td', { 'data-label': 'Created', text: fmtTime(k.created_at) }),
      el('td', { 'data-label': 'Expires', text: fmtTime(k.expires_at) }),
      el('td', { 'data-label': 'Status', text: status(k) }),
      el('td', { 'data-label': 'Actions', class: 'actions-cell' }, revoke));
  }

  async function load() {
    try {
      const d = await api('GET', '/keys');
      rows.replaceChildren(...(d.keys.length ? d.keys.map(row) : [el('tr', {}, el('td', { colspan: 6, text: 'No keys yet.' }))]));
    } catch (e) { fail(e); }
  }

  async function revokeKey(k, name) {
    if (!confirm('Revoke "' + name + '"? Requests with it stop working within 2 seconds. This cannot be undone.')) return;
    try {
      await api('DELETE', '/keys/' + encodeURIComponent(k.id));
      notice('Key "' + name + '" revoked.', 'ok');
      load();
    } catch (e) { fail(e); }
  }

  document.getElementById('key-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const f = ev.target;
    // A key needs a name: an unnamed key cannot be told apart later.
    const nameErr = document.getElementById('key-name-error');
    const named = f.name.value.trim() !== '';
    nameErr.hidden = named;
    if (named) f.name.removeAttribute('aria-invalid'); else f.name.setAttribute('aria-invalid', 'true');
    if (!named) { f.name.focus(); return; }
    const scopes = [...f.querySelectorAll('input[name=scopes]:checked')].map((c) => c.value);
    if (!scopes.length) { notice('Choose at least one scope.'); return; }
    const body = { name: f.name.value.trim(), scopes, expires_in_s: f.expiry.value ? Number(f.expiry.value) : null };
    try {
      const k = await api('POST', '/keys', body);
      notice('');
      const box = document.getElementById('new-key');
      const input = document.getElementById('new-key-value');
      input.value = k.key;
      box.hidden = false;
      document.getElementById('copy-status').textContent = '';
      input.focus();
      input.select();
      f.reset();
      load();
    } catch (e) { fail(e); }
  });

  document.getElementById('copy-key').addEventListener('click', async () => {
    const input = document.getElementById('new-key-value');
    const out = document.getElementById('copy-status');
    try {
      await navigator.clipboard.writeText(input.value);
      out.textContent = 'Copied to the clipboard.';
    } catch (e) {
      input.select();
      out.textContent = document.execCommand && document.execCommand('copy')
        ? 'Copied to the clipboard.' : 'Select the key and copy it with your keyboard.';
    }
  });

  load();
})();
