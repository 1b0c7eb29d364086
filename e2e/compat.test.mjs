// End-to-end test of the compatible speech endpoint (issue 8): the real
// voicesvc binary, driven by the official `openai` npm client pointed at
// base URL {api_root}/compat. Run by `make test` (target test-e2e):
//
//   cd e2e && npm ci && VOICESVC_BIN=/path/to/voicesvc npm test
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { Stream } from 'openai/streaming';
import { Suite, run } from './lib/server.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const suite = new Suite('voicesvc-e2e-');
const dir = suite.dir;
const srv = suite.server();

let apiRoot; // http://ADDR/voice-svc/api/v1/public
let key; // a pro workspace's API key
let alias; // an English catalog voice's alias
let voiceId; // another English catalog voice's id

async function workspaceKey(plan, ...update) {
  return (await srv.workspace(plan, 'e2e-' + plan, ...update)).key;
}

before(async () => {
  await srv.start();
  apiRoot = srv.api;
  key = await workspaceKey('pro');
  const en = await srv.englishVoices(key);
  assert.ok(en.length >= 2, 'two English catalog voices');
  alias = en[0].alias;
  voiceId = en[1].id;
});

after(() => suite.close());

// bearer: the API key as `Authorization: Bearer`, as the SDK sends apiKey.
const bearer = (k = key) => new OpenAI({ apiKey: k, baseURL: apiRoot + '/compat', maxRetries: 0 });
// xapikey: the key in X-API-Key, with no Authorization header at all.
const xapikey = (k = key) => new OpenAI({
  apiKey: 'unused', baseURL: apiRoot + '/compat', maxRetries: 0,
  defaultHeaders: { 'X-API-Key': k, Authorization: null },
});

const TEXT = 'Hello from the compatible endpoint. This is a second sentence.';

function rmsS16(buf) {
  const n = Math.floor(buf.length / 2);
  let sum = 0;
  for (let i = 0; i < n; i++) {
    const x = buf.readInt16LE(2 * i) / 32768;
    sum += x * x;
  }
  return Math.sqrt(sum / Math.max(n, 1));
}

// isMP3 checks for an MPEG audio frame header (or an ID3 tag) at the start.
const isMP3 = (b) => (b[0] === 0xff && (b[1] & 0xe0) === 0xe0) || b.subarray(0, 3).toString() === 'ID3';

async function speak(client, params) {
  const res = await client.audio.speech.create({ input: TEXT, ...params });
  return { res, body: Buffer.from(await res.arrayBuffer()) };
}

test('every format: mp3 (default and explicit), wav, pcm', async () => {
  const cases = [
    { params: { model: 'service-v1', voice: alias }, ctype: 'audio/mpeg' },
    { params: { model: 'tts-1', voice: alias, response_format: 'mp3' }, ctype: 'audio/mpeg' },
    { params: { model: 'tts-1', voice: alias, response_format: 'wav' }, ctype: 'audio/wav' },
    { params: { model: 'service-v1', voice: alias, response_format: 'pcm' }, ctype: 'audio/pcm' },
  ];
  for (const { params, ctype } of cases) {
    const { res, body } = await speak(bearer(), params);
    assert.equal(res.headers.get('content-type'), ctype, JSON.stringify(params));
    assert.ok(res.headers.get('x-request-id'));
    assert.match(res.headers.get('x-billing-remaining') ?? '', /^\d+$/);
    assert.match(res.headers.get('ratelimit') ?? '', /"concurrency";r=\d+/);
    assert.ok(body.length > 1000, `${ctype}: ${body.length} bytes`);
    if (ctype === 'audio/mpeg') assert.ok(isMP3(body), 'mp3 frame header');
    if (ctype === 'audio/wav') {
      assert.equal(body.subarray(0, 4).toString(), 'RIFF');
      assert.equal(body.subarray(8, 12).toString(), 'WAVE');
      assert.equal(body.readUInt32LE(24), 24000);
      assert.ok(rmsS16(body.subarray(44)) > 0.01, 'wav not silent');
    }
    if (ctype === 'audio/pcm') {
      assert.equal(body.length % 2, 0);
      assert.notEqual(body.subarray(0, 4).toString(), 'RIFF', 'pcm has no header');
      assert.ok(rmsS16(body) > 0.01, 'pcm not silent');
    }
  }
});

test('alias and id voices, tts-1 and service-v1, Bearer and X-API-Key', async () => {
  for (const client of [bearer(), xapikey()]) {
    for (const voice of [alias, voiceId]) {
      for (const model of ['tts-1', 'service-v1', 'gpt-4o-mini-tts']) {
        const { res, body } = await speak(client, {
          model, voice, input: 'Hi there.', response_format: 'pcm', speed: 1.25, instructions: 'Cheerful.',
        });
        assert.equal(res.status, 200);
        assert.ok(body.length > 0 && rmsS16(body) > 0.01, `${voice} ${model}`);
      }
    }
  }
});

test('streamed response: chunks arrive before the whole text is done', async (t) => {
  const input = Array.from({ length: 6 }, (_, i) => `This is sentence number ${i + 1} of the streaming test.`).join(' ');
  for (const response_format of ['mp3', 'pcm', 'wav']) {
    const start = performance.now();
    const res = await bearer().audio.speech.create({ model: 'tts-1', voice: alias, input, response_format }).asResponse();
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('transfer-encoding'), 'chunked');
    const reader = res.body.getReader();
    let first = 0;
    let chunks = 0;
    const parts = [];
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (!first) first = performance.now() - start;
      chunks++;
      parts.push(Buffer.from(value));
    }
    const total = performance.now() - start;
    const body = Buffer.concat(parts);
    assert.ok(chunks > 1, `${response_format}: ${chunks} chunk(s)`);
    assert.ok(first < total, `${response_format}: first ${first} ms, total ${total} ms`);
    if (response_format === 'mp3') assert.ok(isMP3(body));
    if (response_format === 'wav') {
      // Streamed: the length is unknown when the header leaves.
      assert.equal(body.readUInt32LE(4), 0xffffffff, 'RIFF size');
      assert.equal(body.readUInt32LE(40), 0xffffffff, 'data size');
    }
    t.diagnostic(`stream ${response_format}: ${chunks} chunks, ${body.length} bytes, first ${first.toFixed(1)} ms, total ${total.toFixed(1)} ms`);
  }
});

test('unknown voice: 404 surfaced as an APIError with our message', async () => {
  await assert.rejects(speak(bearer(), { model: 'tts-1', voice: 'no-such-voice' }), (err) => {
    assert.ok(err instanceof OpenAI.NotFoundError, String(err));
    assert.ok(err instanceof OpenAI.APIError);
    assert.equal(err.status, 404);
    assert.equal(err.code, 'not_found');
    assert.equal(err.param, 'voice');
    assert.equal(err.type, 'invalid_request_error');
    assert.match(err.message, /voice "no-such-voice" not found/);
    assert.ok(err.requestID?.startsWith('req_'));
    return true;
  });
});

test('an access token is refused (401)', async () => {
  const res = await fetch(apiRoot + '/tokens', {
    method: 'POST', headers: { 'X-API-Key': key, 'Content-Type': 'application/json' }, body: '{}',
  });
  assert.equal(res.status, 201);
  const token = (await res.json()).data.token;
  assert.match(token, /^vst_/);
  await assert.rejects(speak(bearer(token), { model: 'tts-1', voice: alias }), (err) => {
    assert.ok(err instanceof OpenAI.AuthenticationError, String(err));
    assert.equal(err.status, 401);
    assert.equal(err.type, 'authentication_error');
    return true;
  });
});

test('too long input is refused (400)', async () => {
  await assert.rejects(speak(bearer(), { model: 'tts-1', voice: alias, input: 'a'.repeat(10_001) }), (err) => {
    assert.ok(err instanceof OpenAI.BadRequestError, String(err));
    assert.equal(err.status, 400);
    assert.equal(err.code, 'text_too_long');
    assert.equal(err.param, 'input');
    return true;
  });
});

test('unsupported response_format is refused (400), the message listing the supported ones', async () => {
  await assert.rejects(speak(bearer(), { model: 'tts-1', voice: alias, response_format: 'aac' }), (err) => {
    assert.ok(err instanceof OpenAI.BadRequestError, String(err));
    assert.equal(err.status, 400);
    assert.equal(err.code, 'invalid_output_format');
    assert.equal(err.param, 'response_format');
    assert.match(err.message, /mp3, opus, flac, wav, pcm/);
    return true;
  });
});

test('429 with Retry-After surfaced', async () => {
  const client = bearer(await workspaceKey('free', '--rps', '1'));
  const params = { model: 'tts-1', voice: alias, input: 'Hi.', response_format: 'pcm' };
  let refused;
  for (let i = 0; i < 4 && !refused; i++) {
    try {
      await speak(client, params);
    } catch (err) {
      refused = err;
    }
  }
  assert.ok(refused instanceof OpenAI.RateLimitError, String(refused));
  assert.equal(refused.status, 429);
  assert.equal(refused.code, 'rate_limited');
  assert.equal(refused.type, 'rate_limit_error');
  assert.match(refused.headers.get('retry-after') ?? '', /^[1-9]\d*$/);
  assert.match(refused.headers.get('ratelimit-policy') ?? '', /"rps";q=1/);
});

test('429 concurrency_limited with Retry-After while a stream holds the slot', async () => {
  const client = bearer(await workspaceKey('free', '--concurrency', '1'));
  const input = 'A long text keeps the only slot busy while nobody reads it. '.repeat(100);
  const res = await client.audio.speech.create({ model: 'tts-1', voice: alias, input, response_format: 'pcm' }).asResponse();
  const reader = res.body.getReader();
  await reader.read(); // streaming has begun; the rest is left unread
  try {
    await assert.rejects(speak(client, { model: 'tts-1', voice: alias, input: 'Hi.' }), (err) => {
      assert.ok(err instanceof OpenAI.RateLimitError, String(err));
      assert.equal(err.code, 'concurrency_limited');
      assert.match(err.headers.get('retry-after') ?? '', /^[1-9]\d*$/);
      assert.match(err.headers.get('ratelimit') ?? '', /"concurrency";r=0/);
      return true;
    });
  } finally {
    await reader.cancel();
  }
});

// tool runs an installed command-line tool on bytes written to a file.
async function tool(bytes, name, cmd, ...args) {
  const path = join(dir, name);
  writeFileSync(path, bytes);
  return run(cmd, [...args, path]);
}

test('speed is honoured: twice as fast is half as long', async () => {
  const params = { model: 'tts-1', voice: alias, response_format: 'pcm' };
  const { body: normal } = await speak(bearer(), params);
  for (const speed of [0.5, 2]) {
    const { body } = await speak(bearer(), { ...params, speed });
    const ratio = normal.length / body.length;
    assert.ok(ratio > speed * 0.75 && ratio < speed * 1.25, `speed ${speed}: ${body.length} vs ${normal.length} bytes`);
  }
  for (const speed of [0.2, 4.5]) {
    await assert.rejects(speak(bearer(), { ...params, speed }), (err) => {
      assert.ok(err instanceof OpenAI.BadRequestError, String(err));
      assert.equal(err.code, 'invalid_speed');
      assert.equal(err.param, 'speed');
      return true;
    });
  }
});

test('opus is an Ogg Opus file that opusinfo accepts', async () => {
  const { res, body } = await speak(bearer(), { model: 'tts-1', voice: alias, response_format: 'opus' });
  assert.equal(res.headers.get('content-type'), 'audio/ogg');
  assert.equal(body.subarray(0, 4).toString(), 'OggS');
  assert.ok(body.subarray(0, 64).includes('OpusHead'), 'OpusHead in the first page');
  const { stdout } = await tool(body, 'speech.opus', 'opusinfo');
  assert.match(stdout, /Opus stream/);
});

test('flac is a FLAC file that flac -t accepts', async () => {
  const { res, body } = await speak(bearer(), { model: 'tts-1', voice: alias, response_format: 'flac' });
  assert.equal(res.headers.get('content-type'), 'audio/flac');
  assert.equal(body.subarray(0, 4).toString(), 'fLaC');
  await tool(body, 'speech.flac', 'flac', '-t', '-s'); // rejects on a broken file
});

// sseEvents reads a stream_format "sse" answer with the SDK's own SSE reader.
async function sseEvents(params) {
  const res = await bearer().audio.speech.create({ model: 'tts-1', voice: alias, stream_format: 'sse', ...params }).asResponse();
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('content-type'), 'text/event-stream');
  const events = [];
  for await (const ev of Stream.fromSSEResponse(res, new AbortController())) events.push(ev);
  return events;
}

test('stream_format sse: delta events carry the response_format bytes, then done with the usage', async () => {
  const input = 'Hello from the compatible endpoint, in events.';
  const { body: plain } = await speak(bearer(), { model: 'tts-1', voice: alias, input, response_format: 'pcm' });
  for (const response_format of ['pcm', 'opus', 'flac', 'mp3', 'wav']) {
    const events = await sseEvents({ input, response_format });
    const done = events.pop();
    assert.deepEqual(done, {
      type: 'speech.audio.done',
      usage: { input_tokens: input.length, output_tokens: 0, total_tokens: input.length },
    });
    assert.ok(events.length >= 2, `${response_format}: ${events.length} deltas`);
    for (const ev of events) assert.equal(ev.type, 'speech.audio.delta');
    const audio = Buffer.concat(events.map((ev) => Buffer.from(ev.audio, 'base64')));
    if (response_format === 'pcm') {
      // The same audio as the plain answer (espeak is not bit-exact from
      // one run to the next: compare the length and the level).
      assert.equal(audio.length, plain.length);
      assert.ok(Math.abs(rmsS16(audio) - rmsS16(plain)) < 0.1 * rmsS16(plain), 'pcm level');
    }
    if (response_format === 'opus') await tool(audio, 'sse.opus', 'opusinfo');
    if (response_format === 'flac') await tool(audio, 'sse.flac', 'flac', '-t', '-s');
    if (response_format === 'mp3') assert.ok(isMP3(audio));
    if (response_format === 'wav') assert.equal(audio.subarray(0, 4).toString(), 'RIFF');
  }
  await assert.rejects(speak(bearer(), { model: 'tts-1', voice: alias, stream_format: 'chunks' }), (err) => {
    assert.ok(err instanceof OpenAI.BadRequestError, String(err));
    assert.equal(err.code, 'invalid_request');
    assert.equal(err.param, 'stream_format');
    return true;
  });
});

test('models: client.models.list()', async () => {
  const models = [];
  for await (const m of bearer().models.list()) models.push(m);
  assert.equal(models.length, 1);
  assert.equal(models[0].id, 'service-v1');
  assert.equal(models[0].object, 'model');
  assert.equal(models[0].owned_by, 'voicesvc');
  assert.ok(Number.isInteger(models[0].created) && models[0].created > 1e9);
  const viaHeader = [];
  for await (const m of xapikey().models.list()) viaHeader.push(m.id);
  assert.deepEqual(viaHeader, ['service-v1']);
});

test('voices: every usable voice, each one the speech endpoint takes', async () => {
  for (const client of [bearer(), xapikey()]) {
    const { voices } = await client.get('/audio/voices');
    const ids = voices.map((v) => v.id);
    assert.ok(ids.includes(alias), `alias ${alias} listed`);
    for (const v of voices) {
      assert.deepEqual(Object.keys(v).sort(), ['id', 'language', 'name']);
      assert.equal(typeof v.name, 'string');
    }
    const { res } = await speak(client, { model: 'tts-1', voice: ids[ids.length - 1], input: 'Hi.', response_format: 'pcm' });
    assert.equal(res.status, 200);
  }
  const token = (await (await fetch(apiRoot + '/tokens', {
    method: 'POST', headers: { 'X-API-Key': key, 'Content-Type': 'application/json' }, body: '{}',
  })).json()).data.token;
  await assert.rejects(bearer(token).get('/audio/voices'), (err) => {
    assert.ok(err instanceof OpenAI.AuthenticationError, String(err));
    assert.equal(err.type, 'authentication_error');
    return true;
  });
});

test('CORS: the preflight allows the SDK headers; the audio headers are exposed', async () => {
  const asked = 'authorization,content-type,x-stainless-arch,x-stainless-lang,x-stainless-os,'
    + 'x-stainless-package-version,x-stainless-retry-count,x-stainless-runtime,x-stainless-runtime-version,x-stainless-timeout';
  const pre = await fetch(apiRoot + '/compat/audio/speech', {
    method: 'OPTIONS',
    headers: { Origin: 'https://app.example', 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': asked },
  });
  assert.equal(pre.status, 204);
  assert.equal(pre.headers.get('access-control-allow-origin'), '*');
  assert.match(pre.headers.get('access-control-allow-methods') ?? '', /POST/);
  const allowed = (pre.headers.get('access-control-allow-headers') ?? '').toLowerCase().split(/\s*,\s*/);
  for (const h of asked.split(',')) assert.ok(allowed.includes(h), `${h} allowed`);

  const { res } = await speak(bearer(), { model: 'tts-1', voice: alias, input: 'Hi.', response_format: 'pcm' });
  const exposed = (res.headers.get('access-control-expose-headers') ?? '').split(/\s*,\s*/);
  for (const h of ['X-Sample-Rate', 'X-Audio-Format', 'X-Channels', 'Idempotent-Replayed', 'Deprecation', 'X-Request-Id']) {
    assert.ok(exposed.includes(h), `${h} exposed`);
  }
  assert.equal(res.headers.get('x-sample-rate'), '24000');
});

// The README's realtime example for a voice agent (examples/realtime-agent.mjs)
// runs as written: tokens streamed into a context, audio and word timestamps
// as they come, a barge-in cancel, and the receipt saying what was heard.
test('the realtime agent example: barge-in receipt', { timeout: 60_000 }, async () => {
  // As its header says to run it: plain node (on Node 20, with the ws
  // package of examples/package.json, which make test-e2e installs).
  const { stdout } = await run(process.execPath, [join(here, '..', 'examples', 'realtime-agent.mjs')], {
    env: { ...process.env, VOICESVC_URL: apiRoot.replace('/voice-svc/api/v1/public', ''), VOICESVC_KEY: key,
      VOICESVC_VOICE: voiceId, BARGE_IN_AFTER_S: '1.5' },
  });
  const out = JSON.parse(stdout.trim().split('\n').at(-1));
  assert.equal(out.type, 'task_cancelled', stdout);
  assert.ok(out.audio_sent_s >= 1.5, 'audio sent before the cancel: ' + out.audio_sent_s);
  assert.ok(out.spoken_until > 0 && out.heard.length > 0, 'some words were heard: ' + stdout);
  assert.ok('Sure. The train to Lyon leaves at nine fifteen'.startsWith(out.heard.slice(0, 20)), out.heard);
  assert.ok(out.words > 0, 'word timestamps came');
});

test('models: client.models.retrieve() answers the name asked for', async () => {
  for (const name of ['service-v1', 'tts-1']) {
    const m = await bearer().models.retrieve(name);
    assert.equal(m.id, name);
    assert.equal(m.object, 'model');
    assert.equal(m.owned_by, 'voicesvc');
    assert.ok(Number.isInteger(m.created) && m.created > 1e9);
  }
  assert.equal((await xapikey().models.retrieve('service-v1')).id, 'service-v1');
});

// Workspace voice aliases (issue 27): an OpenAI voice name speaks only once
// the workspace has mapped it onto one of its voices, and only for that
// workspace.
test('workspace aliases: voice "alloy" is 404 until the workspace names a voice so', async () => {
  const params = { model: 'tts-1', voice: 'alloy', input: 'Hi there.', response_format: 'pcm' };
  const notFound = (err) => {
    assert.ok(err instanceof OpenAI.NotFoundError, String(err));
    assert.equal(err.status, 404);
    assert.equal(err.param, 'voice');
    return true;
  };
  await assert.rejects(speak(bearer(), params), notFound);

  // A voice of the workspace: a remix of a catalog voice.
  const api = (method, path, body, k = key) => fetch(apiRoot + path, {
    method, headers: { 'X-API-Key': k, 'Content-Type': 'application/json' }, body: body && JSON.stringify(body),
  });
  let res = await api('POST', '/voices', { name: 'Alloy of mine', base_voice_id: voiceId, consent: true });
  assert.equal(res.status, 201, await res.clone().text());
  const voice = (await res.json()).data.voice;
  assert.deepEqual(voice.workspace_aliases, []);

  res = await api('PUT', `/voices/${voice.id}/aliases`, { aliases: ['alloy'] });
  assert.equal(res.status, 200, await res.clone().text());
  assert.deepEqual((await res.json()).data, { voice_id: voice.id, aliases: ['alloy'] });
  res = await api('GET', `/voices/${voice.id}`);
  assert.deepEqual((await res.json()).data.voice.workspace_aliases, ['alloy']);

  for (const client of [bearer(), xapikey()]) {
    const { res: r, body } = await speak(client, params);
    assert.equal(r.status, 200);
    assert.ok(body.length > 0 && rmsS16(body) > 0.01, 'audio by the alias');
  }
  // The SDK's voice list names it, as an entry the speech endpoint takes.
  const { voices } = await bearer().get('/audio/voices');
  const entry = voices.find((v) => v.id === 'alloy');
  assert.ok(entry, 'alloy listed: ' + JSON.stringify(voices.map((v) => v.id)));
  assert.deepEqual(Object.keys(entry).sort(), ['id', 'language', 'name']);

  // Another workspace does not see it.
  const other = await workspaceKey('pro');
  await assert.rejects(speak(bearer(other), params), notFound);
  const { voices: theirs } = await bearer(other).get('/audio/voices');
  assert.ok(!theirs.some((v) => v.id === 'alloy'), 'not listed for another workspace');
  res = await api('GET', `/voices/${voice.id}/aliases`, undefined, other);
  assert.equal(res.status, 404);
  // Its names are its own: it may give the same name to another voice.
  res = await api('PUT', `/voices/${voiceId}/aliases`, { aliases: ['alloy'] }, other);
  assert.equal(res.status, 200, 'a name is unique within a workspace only');
  assert.equal((await speak(bearer(other), params)).res.status, 200);

  // Removing the list makes the name unknown again.
  res = await api('PUT', `/voices/${voice.id}/aliases`, { aliases: [] });
  assert.equal(res.status, 200);
  await assert.rejects(speak(bearer(), params), notFound);
});
