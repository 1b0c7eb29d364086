// End-to-end test of the Cartesia dialect (issue 29, docs/dialects.md#cartesia):
// the real voicesvc binary over TLS, driven by Cartesia's official client
// (@cartesia/cartesia-js) and LiveKit's Cartesia plugin, each unchanged but
// for its base URL and key. Started by run.mjs (the certificate); run by
// `make test` (target test-e2e):
//
//   cd e2e/cartesia && npm ci && VOICESVC_BIN=/path/to/voicesvc npm test
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { initializeLogger } from '@livekit/agents';
import * as lkcartesia from '@livekit/agents-plugin-cartesia';
import { Suite } from '../lib/server.mjs';

// The client's ES build calls require('ws'), which Node 20 has no
// require for in a module: load its CommonJS build.
const require = createRequire(import.meta.url);
const { Cartesia, AuthenticationError, BadRequestError, RateLimitError, NotFoundError } = require('@cartesia/cartesia-js');

const suite = new Suite('voicesvc-e2e-cartesia-');
const srv = suite.server();

let origin; // https://ADDR
let apiRoot; // https://ADDR/voice-svc/api/v1/public
let base; // the dialect's base URL: apiRoot/compat/cartesia
let key; // a pro workspace's API key
let voice; // an English catalog voice's id

async function workspaceKey(plan, ...update) {
  return (await srv.workspace(plan, 'e2e-cartesia-' + plan, ...update)).key;
}

before(async () => {
  await srv.start('--tls-cert', process.env.VOICESVC_TLS_CERT, '--tls-key', process.env.VOICESVC_TLS_KEY);
  origin = srv.base;
  apiRoot = srv.api;
  base = apiRoot + '/compat/cartesia';
  key = await workspaceKey('pro');
  const en = await srv.englishVoices(key);
  assert.ok(en.length >= 1, 'an English catalog voice');
  voice = en[0].id;
});

after(() => suite.close());

// client: the official client as an agent configures it, but for the base URL.
const client = (k = key) => new Cartesia({ apiKey: k, baseURL: base, maxRetries: 0 });

const TEXT = 'Hello from the Cartesia dialect. This is a second sentence.';

// nativeSeconds is the duration of the native speak's s16le of TEXT at rate.
async function nativeSeconds(rate) {
  const res = await fetch(`${apiRoot}/voices/${voice}/speak`, {
    method: 'POST', headers: { 'X-API-Key': key, 'Content-Type': 'application/json' },
    body: JSON.stringify({ text: TEXT, output_format: 's16le', sample_rate: rate }),
  });
  assert.equal(res.status, 200);
  return (await res.arrayBuffer()).byteLength / 2 / rate;
}

const WIDTH = { pcm_s16le: 2, pcm_f32le: 4, pcm_mulaw: 1, pcm_alaw: 1 };

// wavData returns a WAV's data chunk (the header's sizes are the body's).
function wavData(buf) {
  assert.equal(buf.subarray(0, 4).toString(), 'RIFF');
  assert.equal(buf.subarray(8, 12).toString(), 'WAVE');
  for (let off = 12; off + 8 <= buf.length;) {
    const id = buf.subarray(off, off + 4).toString();
    const size = buf.readUInt32LE(off + 4);
    if (id === 'data') {
      assert.equal(size, buf.length - off - 8, 'the data size is the body\'s');
      return { rate: buf.readUInt32LE(24), bits: buf.readUInt16LE(34), data: buf.subarray(off + 8) };
    }
    off += 8 + size;
  }
  throw new Error('no data chunk');
}

const within2 = (got, want, what) =>
  assert.ok(Math.abs(got - want) / want <= 0.02, `${what}: ${got.toFixed(4)} s vs native ${want.toFixed(4)} s`);

test('bytes: wav and every raw encoding at 8, 16, 24 and 44.1 kHz last as long as the native speak', async () => {
  const c = client();
  for (const rate of [8000, 16000, 24000, 44100]) {
    const want = await nativeSeconds(rate);
    const wavRes = await c.tts.generate({
      model_id: 'sonic-3', transcript: TEXT, voice: { mode: 'id', id: voice },
      output_format: { container: 'wav', encoding: 'pcm_s16le', sample_rate: rate },
    });
    assert.equal(wavRes.headers.get('content-type'), 'audio/wav');
    const wav = wavData(Buffer.from(await wavRes.arrayBuffer()));
    assert.equal(wav.rate, rate);
    assert.equal(wav.bits, 16);
    within2(wav.data.length / 2 / rate, want, `wav ${rate}`);
    for (const encoding of Object.keys(WIDTH)) {
      const res = await c.tts.generate({
        model_id: 'sonic-3', transcript: TEXT, voice: voice, language: 'en',
        output_format: { container: 'raw', encoding, sample_rate: rate },
      });
      const body = Buffer.from(await res.arrayBuffer());
      assert.equal(body.length % WIDTH[encoding], 0);
      within2(body.length / WIDTH[encoding] / rate, want, `${encoding} ${rate}`);
    }
  }
});

test('bytes: mp3 is MPEG audio', async () => {
  const res = await client().tts.generate({
    model_id: 'sonic-3', transcript: TEXT, voice,
    output_format: { container: 'mp3', sample_rate: 44100, bit_rate: 128000 },
  });
  assert.equal(res.headers.get('content-type'), 'audio/mpeg');
  const b = Buffer.from(await res.arrayBuffer());
  assert.ok((b[0] === 0xff && (b[1] & 0xe0) === 0xe0) || b.subarray(0, 3).toString() === 'ID3');
});

test('sse: chunk events, word timestamps that slice the transcript, then done', async () => {
  const stream = await client().tts.generateSSE({
    model_id: 'sonic-3', transcript: TEXT, voice, context_id: 'sse-1', add_timestamps: true,
    output_format: { container: 'raw', encoding: 'pcm_s16le', sample_rate: 16000 },
  });
  let bytes = 0;
  const words = [];
  const types = [];
  for await (const ev of stream) {
    types.push(ev.type);
    assert.equal(ev.context_id, 'sse-1');
    if (ev.type === 'chunk') {
      assert.equal(ev.done, false);
      assert.equal(ev.status_code, 200);
      assert.equal(typeof ev.step_time, 'number');
      bytes += Buffer.from(ev.data, 'base64').length;
    } else if (ev.type === 'timestamps') {
      const t = ev.word_timestamps;
      assert.equal(t.words.length, t.start.length);
      assert.equal(t.words.length, t.end.length);
      t.words.forEach((w, i) => words.push({ w, start: t.start[i], end: t.end[i] }));
    }
  }
  assert.equal(types.at(-1), 'done');
  assert.ok(types.includes('chunk'));
  within2(bytes / 2 / 16000, await nativeSeconds(16000), 'sse');
  // Every word is the transcript's, in order, on a clock that only moves on.
  let at = 0;
  let last = 0;
  for (const { w, start, end } of words) {
    const i = TEXT.indexOf(w, at);
    assert.ok(i >= 0, `word ${JSON.stringify(w)} in the transcript after ${at}`);
    at = i + w.length;
    assert.ok(start >= last - 1e-6 && end >= start, `${w}: ${start}-${end} after ${last}`);
    last = start;
  }
  assert.deepEqual(words.map((x) => x.w).join(' ').replace(/[.,]/g, ''), TEXT.replace(/[.,]/g, ''));
});

test('voices.list pages through the usable voices', async () => {
  const ids = [];
  for await (const v of client().voices.list({ limit: 3 })) {
    assert.equal(typeof v.name, 'string');
    assert.ok(['public', 'private'].includes(v.access));
    ids.push(v.id);
  }
  assert.ok(ids.includes(voice));
  assert.equal(new Set(ids).size, ids.length, 'no voice twice');
});

test('errors: Cartesia\'s error object, the client\'s error classes', async () => {
  const params = {
    model_id: 'sonic-3', transcript: TEXT, voice,
    output_format: { container: 'raw', encoding: 'pcm_s16le', sample_rate: 24000 },
  };
  await assert.rejects(client('vsk_nope').tts.generate(params), (err) => {
    assert.ok(err instanceof AuthenticationError, String(err));
    assert.equal(err.status, 401);
    assert.equal(err.error.title, 'Unauthorized');
    assert.ok(err.error.request_id);
    return true;
  });
  await assert.rejects(client().tts.generate({ ...params, output_format: { container: 'ogg' } }), (err) => {
    assert.ok(err instanceof BadRequestError, String(err));
    assert.equal(err.error.error_code, 'invalid_output_format');
    assert.match(err.error.message, /raw, wav, mp3/);
    return true;
  });
  await assert.rejects(client().tts.generate({ ...params, voice: 'no-such-voice' }), (err) => {
    assert.ok(err instanceof NotFoundError, String(err));
    assert.equal(err.error.error_code, 'not_found');
    return true;
  });
  const res = await fetch(base + '/no/such/route', { headers: { 'X-API-Key': key } });
  assert.equal(res.status, 404);
  const body = await res.json();
  assert.equal(body.error_code, 'not_found');
  assert.equal(body.title, 'Not Found');
});

test('a plan refusal: 429 rate_limited with Retry-After, in Cartesia\'s shape', async () => {
  const c = client(await workspaceKey('free', '--rps', '1'));
  const params = {
    model_id: 'sonic-3', transcript: 'Hi.', voice,
    output_format: { container: 'raw', encoding: 'pcm_s16le', sample_rate: 8000 },
  };
  let refused;
  for (let i = 0; i < 4 && !refused; i++) {
    try {
      await (await c.tts.generate(params)).arrayBuffer();
    } catch (err) {
      refused = err;
    }
  }
  assert.ok(refused instanceof RateLimitError, String(refused));
  assert.equal(refused.status, 429);
  assert.equal(refused.error.error_code, 'rate_limited');
  assert.equal(refused.error.title, 'Too Many Requests');
  assert.match(refused.headers.get('retry-after') ?? '', /^[1-9]\d*$/);
});

test('an access token as the client\'s token', async () => {
  const res = await fetch(apiRoot + '/tokens', {
    method: 'POST', headers: { 'X-API-Key': key, 'Content-Type': 'application/json' }, body: '{}',
  });
  assert.equal(res.status, 201, await res.clone().text());
  const { token } = (await res.json()).data;
  const c = new Cartesia({ token, baseURL: base, maxRetries: 0 });
  const audio = await c.tts.generate({
    model_id: 'sonic-3', transcript: 'Hi.', voice,
    output_format: { container: 'raw', encoding: 'pcm_s16le', sample_rate: 8000 },
  });
  assert.ok((await audio.arrayBuffer()).byteLength > 0);
});

// livekit: LiveKit's Cartesia TTS, standalone (no room: its TTS classes run
// after initializeLogger), pointed at the server's origin: its synthesize()
// posts to /tts/bytes at the host root, over https only.
function livekit(opts = {}) {
  return new lkcartesia.TTS({ apiKey: key, baseUrl: origin, voice, sampleRate: 24000, language: 'en', ...opts });
}

// samplesOf collects the frames of a LiveKit TTS stream.
async function samplesOf(stream) {
  let n = 0;
  for await (const ev of stream) {
    if (ev === Symbol.for('lk.tts.end') || !ev.frame) continue;
    n += ev.frame.samplesPerChannel;
  }
  return n;
}

test('LiveKit plugin: synthesize() at the host root lasts as long as the native speak', async () => {
  initializeLogger({ pretty: false, level: 'warn' });
  const tts = livekit();
  try {
    const samples = await samplesOf(tts.synthesize(TEXT));
    within2(samples / 24000, await nativeSeconds(24000), 'livekit synthesize');
  } finally {
    await tts.close();
  }
});

const wsFormat = { container: 'raw', encoding: 'pcm_s16le', sample_rate: 16000 };

// receiveAll gathers a context's events until done.
async function receiveAll(ctx) {
  const out = { types: [], bytes: 0, words: [], flushes: [] };
  for await (const ev of ctx.receive({ timeout: 30_000 })) {
    out.types.push(ev.type);
    assert.equal(ev.context_id, ctx.contextId);
    if (ev.type === 'chunk') out.bytes += ev.audio.length;
    if (ev.type === 'timestamps') {
      const t = ev.word_timestamps;
      t.words.forEach((w, i) => out.words.push({ w, start: t.start[i], end: t.end[i] }));
    }
    if (ev.type === 'flush_done') out.flushes.push(ev.flush_id);
  }
  return out;
}

// assertSlices: the words are the text's, in order, on a clock that moves on.
function assertSlices(words, text) {
  let at = 0;
  let last = 0;
  for (const { w, start, end } of words) {
    const i = text.indexOf(w, at);
    assert.ok(i >= 0, `word ${JSON.stringify(w)} in ${JSON.stringify(text)} after ${at}`);
    at = i + w.length;
    assert.ok(start >= last - 1e-6 && end >= start, `${w}: ${start}-${end} after ${last}`);
    last = start;
  }
  assert.equal(words.map((x) => x.w).join(' '), text.replace(/[.,]/g, '').trim().split(/\s+/).join(' '));
}

test('websocket: two concurrent contexts, text in pieces with continue, word timestamps, flush acknowledged', async () => {
  const ws = await client().tts.websocket();
  try {
    const opts = { model_id: 'sonic-3', voice: { mode: 'id', id: voice }, output_format: wsFormat, add_timestamps: true, language: 'en' };
    const pieces = {
      'ctx-a': ['Hello from ', 'the first ', 'context. It has ', 'two sentences.'],
      'ctx-b': ['And this is ', 'the second ', 'one, spoken at the same time.'],
    };
    const ctxs = Object.keys(pieces).map((id) => ws.context({ ...opts, contextId: id }));
    const results = Promise.all(ctxs.map(receiveAll));
    for (let i = 0; i < 4; i++) {
      for (const ctx of ctxs) {
        const p = pieces[ctx.contextId][i];
        if (p) await ctx.push({ transcript: p });
      }
    }
    for (const ctx of ctxs) {
      await ctx.flush();
      await ctx.no_more_inputs();
    }
    const got = await results;
    for (const [i, ctx] of ctxs.entries()) {
      const r = got[i];
      const text = pieces[ctx.contextId].join('');
      assert.equal(r.types.at(-1), 'done', ctx.contextId);
      assert.deepEqual(r.flushes, [1], `${ctx.contextId}: one flush_done, flush_id 1`);
      assert.ok(r.bytes > 16000, `${ctx.contextId}: ${r.bytes} bytes of audio`);
      assertSlices(r.words, text);
    }
  } finally {
    ws.close();
  }
});

test('websocket: cancel mid-sentence stops the context\'s audio; the socket goes on', async () => {
  const ws = await client().tts.websocket();
  try {
    const long = 'This context is cancelled while its first very long sentence is still being spoken, ' +
      'so almost none of the words that follow here are ever heard by anybody at all, which is the point.';
    let chunks = 0;
    ws.on('event', (ev) => { if (ev.context_id === 'ctx-c' && ev.type === 'chunk') chunks++; });
    const ctx = ws.context({ model_id: 'sonic-3', voice, output_format: wsFormat, contextId: 'ctx-c', max_buffer_delay_ms: 0 });
    await ctx.send({ transcript: long, continue: false });
    while (chunks === 0) await new Promise((r) => setTimeout(r, 5));
    await ctx.cancel();
    await new Promise((r) => setTimeout(r, 1000));
    const after = chunks;
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal(chunks, after, 'no audio a second after cancel');
    // The socket serves the next context.
    const next = ws.context({ model_id: 'sonic-3', voice, output_format: wsFormat, contextId: 'ctx-d' });
    await next.send({ transcript: 'Still here.', continue: false });
    const r = await receiveAll(next);
    assert.equal(r.types.at(-1), 'done');
    assert.ok(r.bytes > 0);
  } finally {
    ws.close();
  }
});

test('websocket: a bad message is an error event and the socket goes on', async () => {
  const ws = await client().tts.websocket();
  const errors = [];
  ws.on('error', (e) => errors.push(e.error));
  try {
    const ctx = ws.context({ model_id: 'sonic-3', voice, output_format: { container: 'ogg' }, contextId: 'ctx-e' });
    await ctx.send({ transcript: 'Hi.', continue: false });
    await assert.rejects(receiveAll(ctx), /output_format.container/);
    assert.equal(errors.length, 1);
    assert.equal(errors[0].error_code, 'invalid_output_format');
    assert.equal(errors[0].status_code, 400);
    assert.equal(errors[0].context_id, 'ctx-e');
    const ok = ws.context({ model_id: 'sonic-3', voice, output_format: wsFormat, contextId: 'ctx-f' });
    await ok.send({ transcript: 'Fine.', continue: false });
    assert.equal((await receiveAll(ok)).types.at(-1), 'done');
  } finally {
    ws.close();
  }
});

test('LiveKit plugin: a stream over the socket, then one interrupted, then another on the same socket', async () => {
  initializeLogger({ pretty: false, level: 'warn' });
  const tts = livekit();
  try {
    const s1 = tts.stream();
    s1.pushText('Hello from the LiveKit plugin. ');
    s1.pushText('It streams over the Cartesia socket.');
    s1.flush();
    s1.endInput();
    const n1 = await samplesOf(s1);
    assert.ok(n1 > 24000, `${n1} samples`);

    const s2 = tts.stream();
    s2.pushText('This turn is interrupted by the user long before it could ever finish speaking all of its words. '.repeat(3));
    s2.flush();
    let frames = 0;
    for await (const ev of s2) {
      if (ev !== Symbol.for('lk.tts.end') && ev.frame && ++frames === 2) break;
    }
    s2.close();

    const s3 = tts.stream();
    s3.pushText('And the next turn works.');
    s3.flush();
    s3.endInput();
    assert.ok((await samplesOf(s3)) > 0);
  } finally {
    await tts.close();
  }
});
