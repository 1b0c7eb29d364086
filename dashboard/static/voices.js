// Voices: own and catalog voices with filters, preview, settings, delete;
// the workspace's aliases of any voice it can use (PUT /voices/{id}/aliases);
// clone by upload with live job progress; remix of a ready voice.
'use strict';
(function () {
  const { api, notice, fail, el, idChip } = window.vs;
  const WS = document.body.dataset.workspace;
  const list = document.getElementById('voice-list');
  const more = document.getElementById('more');
  const player = document.getElementById('preview');
  let voices = [];
  let page = 1;
  let hasMore = false;
  let editing = null;

  const own = (v) => v.org_id === WS;

  function query(p) {
    const q = new URLSearchParams({ page: String(p), page_size: '100' });
    const st = document.getElementById('f-status').value;
    const lang = document.getElementById('f-lang').value.trim();
    if (st) q.set('status', st);
    if (lang) q.set('language', lang);
    return '/voices?' + q;
  }

  async function load(reset) {
    if (reset) { page = 1; voices = []; }
    try {
      const d = await api('GET', query(page));
      voices = voices.concat(d.voices);
      hasMore = d.has_more;
      render();
      fillBase();
    } catch (e) { fail(e); }
  }

  function visible() {
    const text = document.getElementById('f-text').value.trim().toLowerCase();
    const owner = document.getElementById('f-owner').value;
    return voices.filter((v) => (!text || v.name.toLowerCase().includes(text) || (v.alias || '').includes(text) ||
      (v.workspace_aliases || []).some((a) => a.toLowerCase().includes(text))) &&
      (owner === 'all' || (owner === 'own') === own(v)));
  }

  // Labels read as words: use_case: news -> Use case: News, latin_american
  // -> Latin American.
  const words = (x) => String(x).replace(/[_-]+/g, ' ').trim();
  const sentence = (x) => { const w = words(x); return w.charAt(0).toUpperCase() + w.slice(1); };
  const title = (x) => words(x).replace(/(^|\s)(\p{Ll})/gu, (m, sp, c) => sp + c.toUpperCase());
  function humanLabel(l) { return sentence(l.key) + ': ' + title(l.value); }

  function card(v) {
    const label = (v.labels || []).map(humanLabel).join(', ');
    const actions = el('div', { class: 'row' });
    if (v.status === 'ready') {
      actions.append(el('button', { type: 'button', 'aria-label': 'Preview ' + v.name, onclick: () => preview(v) }, 'Preview'));
    }
    if (own(v)) {
      actions.append(el('button', { type: 'button', 'aria-label': 'Settings of ' + v.name, onclick: () => openSettings(v) }, 'Settings'),
        el('button', { type: 'button', class: 'danger', 'aria-label': 'Delete ' + v.name, onclick: () => del(v) }, 'Delete'));
    } else {
      // A catalog voice: only the workspace's names for it are ours to set.
      actions.append(el('button', { type: 'button', 'aria-label': 'Aliases of ' + v.name, onclick: () => openSettings(v) }, 'Aliases'));
    }
    const names = v.workspace_aliases || [];
    return el('li', { 'data-voice-id': v.id },
      el('h3', { text: v.name }),
      el('p', { class: 'meta' }, el('span', { class: 'badge ' + v.status, text: v.status }), ' ',
        (own(v) ? 'yours' : 'catalog') + ' · ' + v.primary_language + (v.alias ? ' · ' + v.alias : '')),
      label ? el('p', { class: 'meta labels', text: label }) : null,
      names.length ? el('p', { class: 'meta names', text: 'Aliases: ' + names.join(', ') }) : null,
      el('p', { class: 'meta' }, idChip(v.id, v.name)),
      actions);
  }

  function render() {
    const vs = visible();
    list.replaceChildren(...vs.map(card));
    document.getElementById('voice-count').textContent = vs.length ? vs.length + (vs.length === 1 ? ' voice' : ' voices') + ' shown.' : '';
    more.hidden = !hasMore;
    empty(vs.length === 0);
  }

  // The empty list says why and what to do next.
  function empty(none) {
    const box = document.getElementById('voice-empty');
    box.hidden = !none;
    if (!none) return;
    const filtered = ['f-text', 'f-status', 'f-lang'].some((id) => document.getElementById(id).value.trim());
    const owner = document.getElementById('f-owner').value;
    const clone = el('a', { href: '#clone-h', class: 'button primary' }, 'Clone a voice');
    const remix = el('a', { href: '#create-h', class: 'button' }, 'Create one from a catalog voice');
    const clear = el('button', { type: 'button', onclick: clearFilters }, 'Clear the filters');
    if (filtered) {
      box.replaceChildren(el('p', { text: 'No voices match these filters.' }), el('div', { class: 'row' }, clear, clone));
    } else if (owner === 'own') {
      box.replaceChildren(el('p', { text: 'You have no voices of your own yet. Clone your voice from a recording of 10 seconds or more, or create one from a catalog voice with your own name and settings.' }),
        el('div', { class: 'row' }, clone, remix));
    } else {
      box.replaceChildren(el('p', { text: 'No voices here yet. Clone your first voice from a recording, or ask your operator to enable the catalog.' }),
        el('div', { class: 'row' }, clone));
    }
  }

  function clearFilters() {
    for (const id of ['f-text', 'f-status', 'f-lang']) document.getElementById(id).value = '';
    document.getElementById('f-owner').value = 'all';
    load(true);
  }

  // preview plays the voice's sample clip when it has one, else speaks a
  // short line with it (billed like any speech).
  async function preview(v) {
    notice('');
    try {
      let src = v.sample_audio_url;
      if (!src) {
        const res = await fetch(document.body.dataset.api + '/voices/' + v.id + '/speak', {
          method: 'POST', credentials: 'same-origin', headers: { 'Content-Type': 'application/json' },
          body: JSON.stringify({ text: 'Hello, this is ' + v.name + '.', output_format: 'wav', language: v.primary_language }) });
        if (!res.ok) { let j = null; try { j = await res.json(); } catch (e) { /* */ } throw window.vs.errorFrom(res.status, j, 'tts'); }
        src = URL.createObjectURL(await res.blob());
      }
      player.hidden = false;
      player.src = src;
      player.setAttribute('aria-label', 'Preview of ' + v.name);
      await player.play();
    } catch (e) { fail(e); }
  }

  async function del(v) {
    if (!confirm('Delete the voice "' + v.name + '"? This cannot be undone.')) return;
    try {
      await api('DELETE', '/voices/' + v.id);
      notice('Voice "' + v.name + '" deleted.', 'ok');
      load(true);
    } catch (e) { fail(e); }
  }

  // Settings: a dialog. An own voice's name and settings are saved with
  // PATCH; the workspace's aliases of the voice (own or catalog) are edited
  // as a list and saved with one PUT, which replaces them all. A refused
  // alias (400 invalid_request, 409 alias_taken) is shown in the dialog,
  // which stays open; a refused PUT changes nothing.
  const dialog = document.getElementById('settings');
  const sform = document.getElementById('settings-form');
  const ownBox = document.getElementById('s-own');
  const aliasList = document.getElementById('s-aliases');
  const aliasNone = document.getElementById('s-aliases-none');
  const aliasNew = document.getElementById('s-alias-new');
  const aliasErr = document.getElementById('s-alias-error');
  let aliases = []; // the list being edited
  let saved = []; // the voice's aliases when the dialog opened

  function aliasError(text) {
    aliasErr.textContent = text || '';
    aliasErr.hidden = !text;
    if (text) aliasNew.setAttribute('aria-invalid', 'true'); else aliasNew.removeAttribute('aria-invalid');
  }

  function renderAliases() {
    aliasList.replaceChildren(...aliases.map((a) => el('li', { 'data-alias': a },
      el('code', { text: a }),
      el('button', { type: 'button', class: 'link', 'aria-label': 'Remove alias ' + a, onclick: () => removeAlias(a) }, 'Remove'))));
    aliasList.hidden = aliases.length === 0;
    aliasNone.hidden = aliases.length > 0;
  }

  function removeAlias(a) {
    aliases = aliases.filter((x) => x !== a);
    aliasError('');
    renderAliases();
    aliasNew.focus();
  }

  // addAliases adds what the input holds (names separated by commas or
  // spaces). The server checks each name's shape when saved; here only
  // repeats are caught.
  function addAliases() {
    const names = aliasNew.value.split(/[\s,]+/).filter(Boolean);
    const twice = names.find((a, i) => aliases.includes(a) || names.indexOf(a) !== i);
    if (twice) { aliasError('The alias "' + twice + '" is already in the list.'); return false; }
    aliases = aliases.concat(names);
    aliasNew.value = '';
    aliasError('');
    renderAliases();
    return true;
  }
  document.getElementById('s-alias-add').addEventListener('click', () => { addAliases(); aliasNew.focus(); });
  aliasNew.addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter') { ev.preventDefault(); addAliases(); }
  });

  // What a voice does without a setting (docs/api.md, Voice settings; the
  // engine's expressiveness is 0.5): shown in the fields, stored only when changed.
  const DEFAULTS = { speed: 1, pitch: 0, style: 0.5, volume: 1 };
  function openSettings(v) {
    editing = v;
    const mine = own(v);
    ownBox.hidden = !mine;
    ownBox.disabled = !mine; // a catalog voice's fields are not sent, nor checked
    document.getElementById('settings-h').textContent = mine ? 'Voice settings' : 'Voice aliases';
    document.getElementById('s-voice').textContent = (mine ? '' : 'Catalog voice ') + v.name + ' · ' + v.id;
    const s = v.settings || {};
    sform.elements.name.value = v.name;
    for (const k of ['speed', 'pitch', 'style', 'volume']) sform.elements[k].value = s[k] ?? DEFAULTS[k];
    saved = (v.workspace_aliases || []).slice();
    aliases = saved.slice();
    aliasNew.value = '';
    aliasError('');
    renderAliases();
    dialog.showModal();
    if (!mine) aliasNew.focus();
  }
  document.getElementById('settings-cancel').addEventListener('click', () => dialog.close());
  sform.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const v = editing;
    // A name typed but not yet added is meant to be saved too.
    if (aliasNew.value.trim() && !addAliases()) { aliasNew.focus(); return; }
    const button = sform.querySelector('button[value=save]');
    button.disabled = true;
    try {
      if (aliases.join('\n') !== saved.join('\n')) {
        try {
          const d = await api('PUT', '/voices/' + v.id + '/aliases', { aliases });
          saved = d.aliases.slice();
          v.workspace_aliases = d.aliases;
        } catch (e) {
          if (e.status === 400 || e.status === 409) { aliasError(e.message); aliasNew.focus(); return; }
          throw e;
        }
      }
      let name = v.name;
      if (own(v)) {
        const settings = Object.assign({}, v.settings || {});
        for (const k of ['speed', 'pitch', 'style', 'volume']) {
          const raw = sform.elements[k].value;
          // A default shown in its field is stored only when changed.
          if (raw === '' || (!(k in (v.settings || {})) && Number(raw) === DEFAULTS[k])) delete settings[k]; else settings[k] = Number(raw);
        }
        name = sform.elements.name.value;
        await api('PATCH', '/voices/' + v.id, { name, settings });
      }
      dialog.close();
      notice((own(v) ? 'Settings' : 'Aliases') + ' of "' + name + '" saved.', 'ok');
      load(true);
    } catch (e) { dialog.close(); fail(e); load(true); } finally { button.disabled = false; }
  });

  // Clone: upload, then follow the job until it ends.
  document.getElementById('clone-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const f = ev.target;
    const fd = new FormData(f);
    fd.set('consent', f.consent.checked ? 'true' : 'false');
    const box = document.getElementById('job');
    const bar = document.getElementById('job-progress');
    const st = document.getElementById('job-status');
    const button = f.querySelector('button[type=submit]');
    button.disabled = true;
    notice('');
    box.classList.remove('failed');
    try {
      const d = await api('POST', '/voices/clone', fd);
      box.hidden = false;
      bar.value = 0;
      document.getElementById('job-label').textContent = 'Cloning "' + d.voice.name + '"';
      st.textContent = 'Uploaded. Waiting for the clone job…';
      await follow(d.job_id, bar, st);
      f.reset();
    } catch (e) {
      fail(e);
      if (e.code !== 'job_failed') st.textContent = '';
    } finally {
      button.disabled = false;
      load(true); // a failed clone is listed too, to delete or enroll again
    }
  });

  async function follow(jobID, bar, st) {
    for (let i = 0; i < 600; i++) {
      const j = await api('GET', '/jobs/' + jobID);
      bar.value = j.progress || 0;
      if (j.status === 'succeeded') { bar.value = 100; st.textContent = 'Ready: the voice can speak now.'; return; }
      if (j.status === 'failed' || j.status === 'cancelled' || j.status === 'expired') {
        const why = j.error && j.error.message ? j.error.message : j.status;
        // The bar turns red and full, and says why.
        bar.value = 100;
        bar.closest('.job').classList.add('failed');
        document.getElementById('job-label').textContent = document.getElementById('job-label').textContent.replace(/^Cloning/, 'Could not clone');
        st.textContent = 'Cloning failed: ' + why.charAt(0).toUpperCase() + why.slice(1) + '.';
        throw new window.vs.ApiError('Cloning failed: ' + why + '. Try a longer, clearer recording.', 'job_failed', 0);
      }
      st.textContent = (j.status === 'pending' ? 'Queued' : 'Working') + ': ' + (j.progress || 0) + '%';
      await new Promise((r) => setTimeout(r, 500));
    }
    st.textContent = 'Still working; reload the page later to see the voice.';
  }

  // Remix.
  function fillBase() {
    const sel = document.getElementById('n-base');
    const cur = sel.value;
    // Own voices first, then the catalog.
    const ready = voices.filter((v) => v.status === 'ready').sort((a, b) => own(b) - own(a));
    sel.replaceChildren(...ready.map((v) => el('option', { value: v.id, text: v.name + (own(v) ? '' : ' (catalog)') })));
    if (cur) sel.value = cur;
  }
  document.getElementById('create-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const f = ev.target;
    try {
      const d = await api('POST', '/voices', { name: f.name.value, base_voice_id: f.base_voice_id.value, consent: f.consent.checked,
        settings: { speed: Number(f.speed.value) } });
      notice('Voice "' + d.voice.name + '" created.', 'ok');
      f.reset();
      load(true);
    } catch (e) { fail(e); }
  });

  for (const id of ['f-text', 'f-owner']) document.getElementById(id).addEventListener('input', render);
  for (const id of ['f-status', 'f-lang']) document.getElementById(id).addEventListener('change', () => load(true));
  document.getElementById('filters').addEventListener('submit', (ev) => { ev.preventDefault(); load(true); });
  more.addEventListener('click', () => { page++; load(false); });
  load(true);
})();
