// End-to-end test of the compatible speech endpoint (issue 8): the real
// voicesvc binary, driven by the official `openai` npm client pointed at
// base URL {api_root}/compat. Run by `make test` (target test-e2e):
//
//   cd e2e && npm ci && VOICESVC_BIN=/path/to/voicesvc npm test
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import OpenAI from 'openai';

const run = promisify(execFile);
const here = dirname(fileURLToPath(import.meta.url));
const BIN = process.env.VOICESVC_BIN || join(here, '..', 'bin', 'voicesvc');
const dir = mkdtempSync(join(tmpdir(), 'voicesvc-e2e-'));
const DB = 'sqlite://' + join(dir, 'x.db');

let server; // the child process
let apiRoot; // http://ADDR/voice-svc/api/v1/public
let key; // a pro workspace's API key
let alias; // an English catalog voice's alias
let voiceId; // another English catalog voice's id

// admin runs `voicesvc admin ...` on the server's store and parses its JSON.
async function admin(...args) {
  const { stdout } = await run(BIN, ['admin', ...args.slice(0, 2), '--db', DB, ...args.slice(2)]);
  return JSON.parse(stdout);
}

// startServer spawns the binary and resolves with its address, read from the
// `voicesvc listening on http://ADDR` line on stderr.
function startServer() {
  return new Promise((resolve, reject) => {
    const child = spawn(BIN, ['serve', '--addr', '127.0.0.1:0', '--db', DB, '--engine', 'espeak'],
      { stdio: ['ignore', 'ignore', 'pipe'] });
    server = child;
    let buf = '';
    const timer = setTimeout(() => reject(new Error('server did not start: ' + buf)), 60_000);
    child.on('exit', (code) => reject(new Error(`server exited ${code}: ${buf}`)));
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (d) => {
      if (apiRoot) return; // keep draining the pipe
      buf += d;
      const m = buf.match(/voicesvc listening on (http:\/\/\S+)/);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
  });
}

async function workspaceKey(plan, ...update) {
  const ws = await admin('workspace', 'create', '--name', 'e2e-' + plan, '--plan', plan);
  if (update.length) await admin('workspace', 'update', '--id', ws.id, ...update);
  return (await admin('key', 'create', '--workspace', ws.id)).key;
}

before(async () => {
  const base = await startServer();
  apiRoot = base + '/voice-svc/api/v1/public';
  key = await workspaceKey('pro');
  const res = await fetch(apiRoot + '/voices?page_size=100', { headers: { 'X-API-Key': key } });
  assert.equal(res.status, 200);
  const en = (await res.json()).data.voices.filter((v) => v.alias && v.primary_language === 'en');
  assert.ok(en.length >= 2, 'two English catalog voices');
  alias = en[0].alias;
  voiceId = en[1].id;
});

after(() => {
  if (server && server.exitCode === null) server.kill('SIGTERM');
  rmSync(dir, { recursive: true, force: true });
});

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

test('unsupported response_format is refused (400)', async () => {
  await assert.rejects(speak(bearer(), { model: 'tts-1', voice: alias, response_format: 'flac' }), (err) => {
    assert.equal(err.status, 400);
    assert.equal(err.param, 'response_format');
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
