// Playground: speaks through the realtime WebSocket and plays the audio as
// it arrives (Web Audio API, raw PCM into an AudioWorklet), shows the time
// to first audio and highlights each word while it is spoken.
//
// The socket authenticates with a one-minute access token that this page
// mints with its session (POST /tokens), offered as the second subprotocol:
// a browser cannot set headers on a WebSocket, and a token, unlike a key,
// is fine to hand to a page.
'use strict';
(function () {
  const { api, notice, fail, el, fmtNum } = window.vs;
  const API = document.body.dataset.api;
  const $ = (id) => document.getElementById(id);
  const form = $('play-form');
  const voiceSel = $('p-voice');
  const wordsEl = $('words');

  // State of the current playback; exposed for the browser test.
  const st = window.vsPlayground = { samplesIn: 0, samplesPlayed: 0, ttfaMs: null, chunks: 0, words: 0, done: false };
  let ws = null, ctx = null, node = null, rate = 24000, format = 'f32le', sentT0 = 0, clickT0 = 0;
  let sentenceStart = {}; // sentence_index -> seconds into the stream
  let spans = [];         // {span, si, start, end} in stream seconds once known
  let timed = new Set();  // sentences with word timestamps
  let chars = [];         // the text sent, in code points (word offsets count them)
  let shown = 0;          // code points of the text shown so far
  let taskOpen = false;   // the context may still send: task_cancel applies
  let heardS = 0;         // seconds played when Stop was pressed

  // A simple guess at the text's language, from its script and its most
  // common words; '' when nothing stands out.
  const COMMON = {
    en: 'the and is are this that with you it of to in for on was be as each',
    de: 'der die das und ist nicht ein eine ich sie es mit zu den von auf wie',
    es: 'el la los las y es que de en un una por con no para se del',
    fr: 'le la les et est un une des que de en pas pour dans ce il qui',
    it: 'il lo la gli le e è che di un una per non con sono del',
    pt: 'o a os as e é que de um uma em não para com do da se',
  };
  const LANG_NAMES = { en: 'English', de: 'German', es: 'Spanish', fr: 'French', it: 'Italian', pt: 'Portuguese', hi: 'Hindi' };
  function detectLanguage(text) {
    if (/[\u0900-\u097F]/.test(text)) return 'hi';
    const words = text.toLowerCase().match(/\p{L}+/gu) || [];
    let best = '', score = 0;
    for (const [lang, list] of Object.entries(COMMON)) {
      const set = new Set(list.split(' '));
      let n = words.filter((w) => set.has(w)).length;
      if (lang === 'de' && /[äöüß]/i.test(text)) n += 2;
      if (lang === 'es' && /[ñ¿¡]/i.test(text)) n += 2;
      if (lang === 'pt' && /[ãõ]/i.test(text)) n += 2;
      if (lang === 'fr' && /[çêœ]/i.test(text)) n += 1;
      if (n > score) { best = lang; score = n; }
    }
    return best;
  }

  // pickVoice selects a voice of the text's language (own voices first),
  // else of the page's language, until the person chooses one.
  let chosen = false;
  function pickVoice() {
    if (chosen) return;
    const guessed = detectLanguage($('p-text').value);
    const page = (document.documentElement.lang || navigator.language || 'en').split('-')[0];
    const opts = [...voiceSel.options];
    const base = (o) => (o.dataset.lang || '').split('-')[0].toLowerCase();
    for (const lang of [guessed, page].filter(Boolean)) {
      const o = opts.find((x) => base(x) === lang);
      if (o) {
        voiceSel.value = o.value;
        $('p-voice-hint').textContent = 'Chosen for ' + (guessed === lang ? 'the text\'s language' : 'this page\'s language') +
          ' (' + (LANG_NAMES[lang] || lang) + '); choose any other.';
        return;
      }
    }
  }

  async function loadVoices() {
    try {
      const d = await api('GET', '/voices?status=ready&page_size=100');
      const ws = document.body.dataset.workspace;
      const mine = d.voices.filter((v) => v.org_id === ws), cat = d.voices.filter((v) => v.org_id !== ws);
      const group = (label, vs) => vs.length ? el('optgroup', { label }, ...vs.map((v) =>
        el('option', { value: v.id, 'data-lang': v.primary_language, text: v.name + ' (' + v.primary_language + ')' }))) : null;
      voiceSel.replaceChildren(...[group('My voices', mine), group('Catalog', cat)].filter(Boolean));
      const want = new URLSearchParams(location.search).get('voice');
      if (want && d.voices.some((v) => v.id === want)) { voiceSel.value = want; chosen = true; } else pickVoice();
    } catch (e) { fail(e); }
  }
  voiceSel.addEventListener('change', () => { chosen = true; $('p-voice-hint').textContent = ''; });
  $('p-text').addEventListener('input', pickVoice);

  function setState(s) { $('state').textContent = s; }

  // teardown ends the session and silences the audio at once.
  function teardown() {
    if (ws && ws.readyState <= 1) { try { ws.send(JSON.stringify({ type: 'session_end' })); } catch (e) { /* */ } ws.close(); }
    ws = null;
    taskOpen = false;
    if (ctx) { ctx.close(); ctx = null; node = null; }
  }

  function idle() {
    $('play').disabled = false;
    $('stop').disabled = true;
  }

  function stop(reason) {
    teardown();
    idle();
    if (reason) setState(reason);
  }

  // Stop silences the audio at once. While the service may still send, it
  // cancels the task (task_cancel) and shows the cancel receipt when
  // task_cancelled comes; when all audio had arrived, there is nothing to
  // cancel and the receipt says what was heard of it.
  function stopPressed() {
    heardS = st.samplesPlayed / rate;
    st.stopped = true;
    if (ctx) { ctx.close(); ctx = null; node = null; }
    idle();
    if (ws && ws.readyState === 1 && taskOpen) {
      setState('cancelling');
      ws.send(JSON.stringify({ type: 'task_cancel', context_id: 'playground' }));
      // A receipt that never comes (a closing socket) still ends the session.
      const mine = ws;
      setTimeout(() => { if (ws === mine && taskOpen) { receipt(null); teardown(); setState('stopped'); } }, 3000);
      return;
    }
    receipt(null);
    teardown();
    setState('stopped');
  }

  // receipt shows what was heard, and with a task_cancelled frame what the
  // service had sent: audio_sent_s and spoken_until (docs/realtime.md).
  function receipt(m) {
    const out = $('receipt');
    const got = st.samplesIn / rate;
    let text = 'Stopped after ' + heardS.toFixed(1) + ' s of audio was played. ';
    if (m) {
      const until = Math.max(0, Math.min(chars.length, m.spoken_until || 0));
      const said = chars.slice(0, until).join('').trim();
      const tail = said.length > 60 ? '…' + said.slice(-60).replace(/^\S*\s/, '') : said;
      text += 'Cancelled: the service had sent ' + Number(m.audio_sent_s).toFixed(1) + ' s of audio, ' +
        (until ? 'up to character ' + fmtNum(until) + ' of ' + fmtNum(chars.length) + ' (“' + tail + '”)' : 'before the first word was complete') +
        '; ' + fmtNum(m.sentences_dropped || 0) + (m.sentences_dropped === 1 ? ' sentence was' : ' sentences were') +
        ' not spoken, and their characters are refunded.';
    } else {
      text += 'All ' + got.toFixed(1) + ' s of audio had already arrived, so nothing was left to cancel.';
    }
    out.textContent = text;
    out.hidden = false;
  }

  function toFloat(buf) {
    if (format === 's16le') {
      const s = new Int16Array(buf), f = new Float32Array(s.length);
      for (let i = 0; i < s.length; i++) f[i] = s[i] / 32768;
      return f;
    }
    return new Float32Array(buf);
  }

  function onAudio(buf) {
    if (!node) return; // stopped, the cancel on its way
    const f = toFloat(buf);
    if (st.ttfaMs === null) {
      const now = performance.now();
      st.ttfaMs = Math.round(now - sentT0);
      // From task_start, what the service adds; from Play, what a person
      // waits (the token and the handshake included).
      $('ttfa').textContent = st.ttfaMs + ' ms';
      $('ttfa-play').textContent = Math.round(now - clickT0) + ' ms';
      setState('playing');
    }
    st.samplesIn += f.length;
    st.chunks++;
    $('received').textContent = (st.samplesIn / rate).toFixed(2) + ' s in ' + fmtNum(st.chunks) + ' chunks';
    node.port.postMessage(f, [f.buffer]);
  }

  // Word times are seconds from the start of the context's audio; a word's
  // end_s is where its audio is known to end when it is sent, so a word is
  // highlighted until the next word of its sentence starts.
  // The text between words (spaces, punctuation) comes from the text sent,
  // by the words' char_start/char_end offsets (code points).
  function showText(upTo) {
    if (upTo > shown) { wordsEl.append(chars.slice(shown, upTo).join('')); shown = upTo; }
  }

  function addWords(si, words) {
    timed.add(si);
    for (const w of words) {
      const prev = spans[spans.length - 1];
      if (prev && prev.abs && prev.si === si) prev.end = Math.max(prev.end, w.start_s);
      const offsets = Number.isInteger(w.char_start) && Number.isInteger(w.char_end) && w.char_start >= shown;
      if (offsets) showText(w.char_start); else if (shown > 0 || wordsEl.childNodes.length) wordsEl.append(' ');
      const span = el('span', { 'data-sentence': si, text: offsets ? chars.slice(w.char_start, w.char_end).join('') : w.word });
      wordsEl.append(span);
      if (offsets) shown = w.char_end;
      spans.push({ span, si, start: w.start_s, end: w.end_s, abs: true });
      st.words++;
    }
  }

  function onMessage(m) {
    switch (m.type) {
      case 'audio_chunk':
        if (m.chunk_index === 0 && !(m.sentence_index in sentenceStart)) sentenceStart[m.sentence_index] = st.samplesIn / rate;
        break;
      case 'word_timestamps':
        addWords(m.sentence_index, m.words || []);
        break;
      case 'sentence_done': {
        // The sentence's last word lasts to the sentence's end.
        const last = spans[spans.length - 1];
        if (last && last.abs && last.si === m.sentence_index) {
          last.end = Math.max(last.end, (sentenceStart[m.sentence_index] || 0) + m.audio_duration_s);
        }
        // Without word timestamps the sentence itself is highlighted.
        if (!timed.has(m.sentence_index)) {
          const span = el('span', { 'data-sentence': m.sentence_index, text: m.text });
          wordsEl.append(span, ' ');
          spans.push({ span, si: m.sentence_index, start: 0, end: m.audio_duration_s });
        }
        break;
      }
      case 'task_done':
        st.done = true;
        taskOpen = false;
        if (timed.size) showText(chars.length);
        setState('all audio received');
        ws.send(JSON.stringify({ type: 'session_end' }));
        break;
      case 'task_cancelled':
        taskOpen = false;
        st.cancelled = { audio_sent_s: m.audio_sent_s, spoken_until: m.spoken_until, sentences_dropped: m.sentences_dropped };
        receipt(m);
        teardown();
        setState('stopped');
        break;
      case 'task_failed':
      case 'error':
        fail(new window.vs.ApiError(humanFrame(m), m.code, 0));
        if (m.type === 'task_failed' || m.fatal) { taskOpen = false; stop('stopped'); }
        break;
    }
  }

  function humanFrame(m) {
    const msgs = { voice_not_found: 'That voice is not ready or does not exist.', text_too_long: 'The text is too long.',
      upstream_busy: 'The speech engine is busy. Try again in a moment.', invalid_language: 'The voice cannot speak that language.' };
    return msgs[m.code] || (m.message ? m.message.charAt(0).toUpperCase() + m.message.slice(1) + '.' : 'Speech failed (' + m.code + ').');
  }

  function highlight() {
    const t = st.samplesPlayed / rate;
    for (const w of spans) {
      const base = w.abs ? 0 : sentenceStart[w.si];
      if (base === undefined) continue;
      const now = t >= base + w.start && t < base + w.end;
      w.span.classList.toggle('now', now);
      w.span.classList.toggle('spoken', t >= base + w.end);
    }
    if (st.done && st.samplesPlayed >= st.samplesIn && ctx) { setState('finished'); idle(); }
  }

  async function play() {
    stop();
    notice('');
    Object.assign(st, { samplesIn: 0, samplesPlayed: 0, ttfaMs: null, chunks: 0, words: 0, done: false, stopped: false, cancelled: null });
    sentenceStart = {}; spans = []; timed = new Set(); shown = 0;
    $('receipt').hidden = true;
    wordsEl.replaceChildren();
    $('ttfa').textContent = '–';
    $('ttfa-play').textContent = '–';
    clickT0 = performance.now();
    $('received').textContent = '–';
    rate = Number($('p-rate').value);
    format = $('p-format').value;
    const voice = voiceSel.value;
    if (!voice) { notice('Choose a voice first.'); return; }
    const lang = voiceSel.selectedOptions[0].dataset.lang || 'en';
    const speed = Number($('p-speed').value) || 1;
    $('play').disabled = true;
    $('stop').disabled = false;
    setState('connecting');
    try {
      ctx = new AudioContext({ sampleRate: rate });
      await ctx.audioWorklet.addModule('/dashboard/static/pcm-worklet.js');
      node = new AudioWorkletNode(ctx, 'pcm-player', { numberOfInputs: 0, outputChannelCount: [1] });
      node.connect(ctx.destination);
      node.port.onmessage = (e) => { st.samplesPlayed = e.data.played; highlight(); };
      await ctx.resume();
      const tok = await api('POST', '/tokens', { ttl_seconds: 60, voice_ids: [voice] });
      const url = location.origin.replace(/^http/, 'ws') + API + '/stream';
      ws = new WebSocket(url, ['service.v1', tok.token]);
      ws.binaryType = 'arraybuffer';
      const text = $('p-text').value;
      chars = Array.from(text);
      ws.onopen = () => {
        sentT0 = performance.now();
        taskOpen = true;
        ws.send(JSON.stringify({ type: 'task_start', context_id: 'playground', voice_id: voice, language: lang,
          text, finalize: true, output_format: format, sample_rate: rate,
          length_scale: Math.min(5, 1 / speed), timestamps: true }));
        setState('waiting for audio');
      };
      ws.onmessage = (e) => { if (typeof e.data === 'string') onMessage(JSON.parse(e.data)); else onAudio(e.data); };
      ws.onerror = () => { if (st.ttfaMs === null) fail(new window.vs.ApiError('The realtime connection was refused. Check your plan and limits on the overview page.', 'ws', 0)); };
      // The socket closes after task_done while the audio plays on: Stop
      // stays until the last sample has played (highlight).
      const mine = ws;
      ws.onclose = () => { if (ws === mine) taskOpen = false; if (ws === mine && !st.done) stop(st.stopped ? 'stopped' : 'connection closed'); };
    } catch (e) { fail(e); stop('stopped'); }
  }

  form.addEventListener('submit', (ev) => { ev.preventDefault(); play(); });
  $('stop').addEventListener('click', stopPressed);
  loadVoices();
})();
