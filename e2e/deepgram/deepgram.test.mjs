// End-to-end test of the Deepgram dialect (issue 31): the real voicesvc
// binary driven by Deepgram's official client (@deepgram/sdk) and LiveKit's
// Deepgram TTS plugin, unchanged but for base URL and key, at
// {api_root}/compat/deepgram. Run by `make test` (target test-e2e):
//
//   cd e2e/deepgram && npm ci && VOICESVC_BIN=/path/to/voicesvc npm test
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import https from 'node:https';
import { DeepgramClient, DeepgramError } from '@deepgram/sdk';
import { initializeLogger } from '@livekit/agents';
import * as lkdeepgram from '@livekit/agents-plugin-deepgram';
import WebSocket from 'ws';
import { Suite, Server, makeCert } from '../lib/server.mjs';

const suite = new Suite('voicesvc-e2e-deepgram-');
const MODEL = 'aura-2-thalia-en'; // a workspace alias of an English catalog voice

initializeLogger({ pretty: false, level: 'warn' });

// Over 5 s of speech at the default pace, in several sentences.
const LONG = 'The quick brown fox jumps over the lazy dog near the river bank. '
  + 'A second sentence follows the first one, and it is a little longer than that. '
  + 'Finally, the third sentence ends this short paragraph about nothing much at all.';

// DeepgramServer is a voicesvc with its Deepgram dialect's base URL.
class DeepgramServer extends Server {
  get deepgram() {
    return this.api + '/compat/deepgram';
  }

  // nativeSeconds is the duration of native speak's WAV of text at rate.
  async nativeSeconds(ws, text, rate) {
    const res = await fetch(`${this.api}/voices/${ws.voice.id}/speak`, {
      method: 'POST', headers: { 'X-API-Key': ws.key, 'Content-Type': 'application/json' },
      body: JSON.stringify({ text, output_format: 'wav', sample_rate: rate }),
    });
    assert.equal(res.status, 200);
    const wav = wavInfo(Buffer.from(await res.arrayBuffer()));
    return wav.seconds;
  }
}

let srv; // plain HTTP on a free port
let ws; // its pro workspace

// A pro workspace, its key, and MODEL as an alias of one of its English
// catalog voices.
before(async () => {
  srv = await suite.server('plain', DeepgramServer).start();
  const { id, key } = await srv.workspace('pro', 'e2e-pro');
  const voice = (await srv.englishVoices(key))[0];
  const put = await fetch(`${srv.api}/voices/${voice.id}/aliases`, {
    method: 'PUT', headers: { 'X-API-Key': key, 'Content-Type': 'application/json' },
    body: JSON.stringify({ aliases: [MODEL] }),
  });
  assert.equal(put.status, 200);
  ws = { id, key, voice };
});

after(() => suite.close());

const client = (opts = {}) => new DeepgramClient({ apiKey: ws.key, baseUrl: srv.deepgram, maxRetries: 0, ...opts });

// wavInfo reads a canonical 44-byte WAV header.
function wavInfo(b) {
  assert.equal(b.subarray(0, 4).toString(), 'RIFF');
  assert.equal(b.subarray(8, 12).toString(), 'WAVE');
  const tag = b.readUInt16LE(20);
  const rate = b.readUInt32LE(24);
  const bits = b.readUInt16LE(34);
  const size = b.readUInt32LE(40);
  assert.equal(size, b.length - 44, 'the data size is the true one');
  return { tag, rate, bits, seconds: size / (bits / 8) / rate };
}

// mp3Seconds walks the MPEG audio frames (after any ID3 tag): frames
// times samples per frame over the rate.
function mp3Seconds(b) {
  let i = 0;
  if (b.subarray(0, 3).toString() === 'ID3') i = 10 + ((b[6] << 21) | (b[7] << 14) | (b[8] << 7) | b[9]);
  const rates = { 3: [44100, 48000, 32000], 2: [22050, 24000, 16000], 0: [11025, 12000, 8000] };
  const kbps = { 3: [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320],
    2: [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160] };
  let frames = 0;
  let rate = 0;
  let spf = 0;
  while (i + 4 <= b.length) {
    assert.ok(b[i] === 0xff && (b[i + 1] & 0xe0) === 0xe0, `frame sync at ${i}`);
    const version = (b[i + 1] >> 3) & 3;
    rate = rates[version][(b[i + 2] >> 2) & 3];
    const bitrate = (version === 3 ? kbps[3] : kbps[2])[b[i + 2] >> 4] * 1000;
    const padding = (b[i + 2] >> 1) & 1;
    spf = version === 3 ? 1152 : 576;
    i += Math.floor((spf / 8) * bitrate / rate) + padding;
    frames++;
  }
  return { seconds: (frames * spf) / rate, rate, spf };
}

// near asserts got is within 2% of want.
function near(got, want, what) {
  console.log(`# ${what}: ${got.toFixed(3)} s, native ${want.toFixed(3)} s (${(100 * (got / want - 1)).toFixed(2)}%)`);
  assert.ok(Math.abs(got - want) <= 0.02 * want, `${what}: ${got.toFixed(3)} s, native ${want.toFixed(3)} s`);
}

async function speak(c, params, text = LONG) {
  const res = await c.speak.v1.audio.generate({ text, model: MODEL, ...params }).withRawResponse();
  return { headers: res.rawResponse.headers, body: Buffer.from(await res.data.arrayBuffer()) };
}

test('REST: linear16 at 8, 16, 24 and 48 kHz, with and without WAV, within 2% of native speak', async () => {
  const native = await srv.nativeSeconds(ws, LONG, 24000);
  assert.ok(native >= 5, `the text lasts ${native} s`);
  for (const rate of [8000, 16000, 24000, 48000]) {
    const want = rate === 24000 ? native : await srv.nativeSeconds(ws, LONG, rate);
    const wav = await speak(client(), { encoding: 'linear16', sample_rate: rate });
    assert.equal(wav.headers.get('content-type'), 'audio/wav');
    const info = wavInfo(wav.body);
    assert.deepEqual([info.tag, info.rate, info.bits], [1, rate, 16]);
    near(info.seconds, want, `wav ${rate}`);
    const raw = await speak(client(), { encoding: 'linear16', container: 'none', sample_rate: rate });
    assert.equal(raw.headers.get('content-type'), 'application/octet-stream');
    assert.notEqual(raw.body.subarray(0, 4).toString(), 'RIFF');
    near(raw.body.length / 2 / rate, want, `raw ${rate}`);
  }
});

test('REST: the answer carries Deepgram headers; the default is linear16 WAV at 24 kHz', async () => {
  const { headers, body } = await speak(client(), {}, 'Hello there.');
  assert.equal(headers.get('dg-model-name'), MODEL);
  assert.equal(headers.get('dg-model-uuid'), ws.voice.id);
  assert.equal(headers.get('dg-char-count'), '12');
  assert.match(headers.get('dg-request-id') ?? '', /^req_/);
  assert.equal(headers.get('dg-request-id'), headers.get('x-request-id'));
  const info = wavInfo(body);
  assert.deepEqual([info.tag, info.rate, info.bits], [1, 24000, 16]);
});

test('REST: mu-law 8 kHz in WAV (the default container) and bare, within 2%', async () => {
  const want = await srv.nativeSeconds(ws, LONG, 8000);
  const wav = await speak(client(), { encoding: 'mulaw', sample_rate: 8000 });
  assert.equal(wav.headers.get('content-type'), 'audio/wav');
  const info = wavInfo(wav.body);
  assert.deepEqual([info.tag, info.rate, info.bits], [7, 8000, 8]);
  near(info.seconds, want, 'mulaw wav');
  const raw = await speak(client(), { encoding: 'mulaw', container: 'none' });
  near(raw.body.length / 8000, want, 'mulaw raw (8 kHz by default)');
  const alaw = wavInfo((await speak(client(), { encoding: 'alaw' }, 'Hi.')).body);
  assert.deepEqual([alaw.tag, alaw.rate, alaw.bits], [6, 8000, 8]);
});

test('REST: MP3 within 2% of native speak, allowing the encoder delay and padding', async () => {
  const want = await srv.nativeSeconds(ws, LONG, 22050);
  const { headers, body } = await speak(client(), { encoding: 'mp3' });
  assert.equal(headers.get('content-type'), 'audio/mpeg');
  const mp3 = mp3Seconds(body);
  assert.equal(mp3.rate, 22050);
  const slack = (3 * mp3.spf) / mp3.rate; // LAME's delay and the last frame's padding
  assert.ok(mp3.seconds >= 0.98 * want && mp3.seconds <= 1.02 * want + slack,
    `mp3 ${mp3.seconds.toFixed(3)} s, native ${want.toFixed(3)} s`);
});

test('REST: Ogg Opus and FLAC', async () => {
  const opus = await speak(client(), { encoding: 'opus' }, 'Hi there.');
  assert.equal(opus.headers.get('content-type'), 'audio/ogg');
  assert.equal(opus.body.subarray(0, 4).toString(), 'OggS');
  const flac = await speak(client(), { encoding: 'flac', sample_rate: 16000 }, 'Hi there.');
  assert.equal(flac.headers.get('content-type'), 'audio/flac');
  assert.equal(flac.body.subarray(0, 4).toString(), 'fLaC');
});

// rejects asserts that p fails with a DeepgramError of status, whose body
// is Deepgram's error shape with category and voicesvc's code.
async function rejects(p, status, category, code) {
  await assert.rejects(p, (err) => {
    assert.ok(err instanceof DeepgramError, String(err));
    assert.equal(err.statusCode, status, JSON.stringify(err.body));
    assert.equal(err.body.category, category);
    assert.equal(err.body.code, code);
    assert.equal(typeof err.body.message, 'string');
    assert.match(err.body.request_id, /^req_/);
    return true;
  });
}

test('REST errors in Deepgram shape: unknown model, bad format, bad key', async () => {
  await rejects(client().speak.v1.audio.generate({ text: 'Hi', model: 'aura-2-nobody-en' }), 400,
    'INVALID_QUERY_PARAMETER', 'invalid_request');
  await rejects(client().speak.v1.audio.generate({ text: 'Hi', model: MODEL, encoding: 'aac' }), 400,
    'INVALID_QUERY_PARAMETER', 'unsupported_response_format');
  await rejects(client().speak.v1.audio.generate({ text: 'Hi', model: MODEL, sample_rate: 96000 }), 400,
    'INVALID_QUERY_PARAMETER', 'invalid_sample_rate');
  await rejects(client().speak.v1.audio.generate({ text: '', model: MODEL }), 400,
    'INVALID_REQUEST_BODY', 'text_required');
  await assert.rejects(client({ apiKey: 'vsk_wrong' }).speak.v1.audio.generate({ text: 'Hi', model: MODEL }), (err) => {
    assert.equal(err.statusCode, 401);
    assert.equal(err.body.category, 'INVALID_AUTH');
    assert.equal(err.body.code, undefined);
    return true;
  });
  // An unknown path under the base answers in the same shape.
  const res = await fetch(srv.deepgram + '/v1/listen', { method: 'POST', headers: { Authorization: 'Token ' + ws.key } });
  assert.equal(res.status, 404);
  const body = await res.json();
  assert.equal(body.category, 'NOT_FOUND');
  assert.equal(body.code, 'not_found');
});

test('credentials: Token and Bearer keys, Bearer access tokens', async () => {
  for (const auth of ['Token ' + ws.key, 'token ' + ws.key, 'Bearer ' + ws.key]) {
    const res = await fetch(srv.deepgram + '/v1/speak?model=' + MODEL + '&container=none', {
      method: 'POST', headers: { Authorization: auth, 'Content-Type': 'application/json' }, body: '{"text":"Hi."}',
    });
    assert.equal(res.status, 200, auth.split(' ')[0]);
  }
  const token = await accessToken();
  const { body } = await speak(client({ apiKey: undefined, accessToken: token }), { container: 'none' }, 'Hi.');
  assert.ok(body.length > 1000);
});

async function accessToken() {
  const res = await fetch(srv.api + '/tokens', {
    method: 'POST', headers: { 'X-API-Key': ws.key, 'Content-Type': 'application/json' }, body: '{}',
  });
  assert.equal(res.status, 201);
  return (await res.json()).data.token;
}

// listen collects a socket's messages: the audio bytes received before
// each text message.
function listen(sock) {
  const events = [];
  let audio = 0;
  let wake = () => {};
  sock.on('message', (m) => {
    if (m instanceof Blob) {
      audio += m.size;
    } else {
      events.push({ ...m, audioBefore: audio });
    }
    wake();
  });
  return {
    events,
    audio: () => audio,
    // next waits for a message of type.
    async next(type, ms = 20_000) {
      const deadline = Date.now() + ms;
      for (;;) {
        const i = events.findIndex((e) => e.type === type && !e.seen);
        if (i >= 0) {
          events[i].seen = true;
          return events[i];
        }
        assert.ok(Date.now() < deadline, `no ${type} in ${JSON.stringify(events)}`);
        await new Promise((r) => { wake = r; setTimeout(r, 100); });
      }
    },
  };
}

async function connect(c, params = {}) {
  const sock = await c.speak.v1.connect({ model: MODEL, encoding: 'linear16', sample_rate: 16000, reconnectAttempts: 0, ...params });
  const got = listen(sock);
  const closed = new Promise((resolve) => sock.on('close', resolve));
  sock.connect();
  await sock.waitForOpen();
  return { sock, got, closed };
}

test('socket: Metadata, several Speaks, Flush -> Flushed after their audio, within 2% of native', async () => {
  const { sock, got, closed } = await connect(client());
  const meta = await got.next('Metadata');
  assert.equal(meta.model_name, MODEL);
  assert.equal(meta.model_uuid, ws.voice.id);
  assert.match(meta.request_id, /^req_/);
  for (const part of LONG.match(/[^ ]+ ?/g)) sock.sendText({ type: 'Speak', text: part }); // word by word, as an LLM
  sock.sendFlush({ type: 'Flush' });
  const flushed = await got.next('Flushed');
  assert.equal(flushed.sequence_id, 0);
  const want = await srv.nativeSeconds(ws, LONG, 16000);
  near(flushed.audioBefore / 2 / 16000, want, 'socket audio before Flushed');
  sock.sendFlush({ type: 'Flush' }); // nothing waiting: at once
  assert.equal((await got.next('Flushed')).sequence_id, 1);
  sock.sendClose({ type: 'Close' });
  const ev = await closed;
  assert.equal(ev.code, 1000);
  assert.equal(got.audio(), flushed.audioBefore, 'no audio after the last Flushed');
});

test('socket: Clear -> Cleared with no audio after it; Speak after Clear speaks again', async () => {
  const { sock, got, closed } = await connect(client(), { encoding: 'mulaw', sample_rate: 8000 });
  await got.next('Metadata');
  sock.sendText({ type: 'Speak', text: LONG + ' ' + LONG });
  sock.sendFlush({ type: 'Flush' });
  while (got.audio() === 0) await new Promise((r) => setTimeout(r, 20)); // speaking has begun
  sock.sendClear({ type: 'Clear' });
  const cleared = await got.next('Cleared');
  assert.equal(cleared.sequence_id, 1);
  await new Promise((r) => setTimeout(r, 1000));
  assert.equal(got.audio(), cleared.audioBefore, 'no audio frame after Cleared');
  assert.ok(!got.events.some((e) => e.type === 'Flushed' && e.sequence_id === 0), 'the cleared Flush is never answered');
  sock.sendText({ type: 'Speak', text: 'Back again.' });
  sock.sendFlush({ type: 'Flush' });
  const flushed = await got.next('Flushed');
  assert.equal(flushed.sequence_id, 2);
  assert.ok(flushed.audioBefore > cleared.audioBefore, 'new audio after the Clear');
  sock.sendClose({ type: 'Close' });
  assert.equal((await closed).code, 1000);
});

test('socket: bad messages get Warnings, the socket goes on; bad handshakes are Deepgram-shaped', async () => {
  const { sock, got } = await connect(client());
  await got.next('Metadata');
  sock.socket.send('not json');
  sock.socket.send('{"type":"Shout","text":"x"}');
  sock.socket.send('{"type":"Speak","text":42}');
  for (let i = 0; i < 3; i++) {
    const w = await got.next('Warning');
    assert.equal(typeof w.description, 'string');
    assert.equal(w.code, 'invalid_message');
  }
  sock.sendText({ type: 'Speak', text: 'Still here.' });
  sock.sendFlush({ type: 'Flush' });
  assert.ok((await got.next('Flushed')).audioBefore > 0);
  sock.close();
  // The handshake's refusals are HTTP answers in Deepgram's shape.
  const wsURL = srv.deepgram.replace(/^http/, 'ws') + '/v1/speak';
  for (const [query, status, code] of [['model=aura-2-nobody-en', 400, 'invalid_request'],
    [`model=${MODEL}&encoding=mp3`, 400, 'invalid_output_format']]) {
    const res = await handshake(`${wsURL}?${query}`, { headers: { Authorization: 'Token ' + ws.key } });
    assert.equal(res.status, status, query);
    assert.equal(JSON.parse(res.body).code, code);
  }
  const res = await handshake(`${wsURL}?model=${MODEL}`, { headers: { Authorization: 'Token vsk_wrong' } });
  assert.equal(res.status, 401);
  assert.equal(JSON.parse(res.body).category, 'INVALID_AUTH');
});

// handshake dials url with ws and resolves with the refused handshake's
// status and body (or status 101).
function handshake(url, opts, protocols) {
  return new Promise((resolve, reject) => {
    const sock = new WebSocket(url, protocols, opts);
    sock.on('unexpected-response', (_, res) => {
      let body = '';
      res.on('data', (d) => { body += d; });
      res.on('end', () => resolve({ status: res.statusCode, body }));
    });
    sock.on('open', () => { resolve({ status: 101, protocol: sock.protocol }); sock.close(); });
    sock.on('error', (e) => reject(e));
  });
}

test('socket credentials: the browser subprotocols ["token", KEY] and ["bearer", TOKEN]', async () => {
  const url = srv.deepgram.replace(/^http/, 'ws') + `/v1/speak?model=${MODEL}`;
  assert.deepEqual(await handshake(url, {}, ['token', ws.key]), { status: 101, protocol: 'token' });
  assert.deepEqual(await handshake(url, {}, ['bearer', await accessToken()]), { status: 101, protocol: 'bearer' });
  assert.equal((await handshake(url, {}, ['token', 'vsk_wrong'])).status, 401);
  // The SDK with an access token sends it as Authorization: Bearer.
  const { sock, got, closed } = await connect(client({ apiKey: undefined, accessToken: await accessToken() }));
  await got.next('Metadata');
  sock.sendClose({ type: 'Close' });
  assert.equal((await closed).code, 1000);
});

// frameSeconds sums LiveKit audio frames' duration.
const frameSeconds = (frames) => frames.reduce((s, f) => s + f.samplesPerChannel / f.sampleRate, 0);

test('LiveKit plugin: stream() within 2% of native; a stream interrupted mid-sentence ends cleanly', async () => {
  const tts = new lkdeepgram.TTS({ apiKey: ws.key, baseUrl: srv.deepgram, model: MODEL, sampleRate: 24000 });
  const stream = tts.stream();
  for (const part of LONG.match(/[^ ]+ ?/g)) stream.pushText(part);
  stream.flush();
  stream.endInput();
  const frames = [];
  for await (const ev of stream) {
    if (typeof ev === 'symbol') break; // END_OF_STREAM
    frames.push(ev.frame);
  }
  near(frameSeconds(frames), await srv.nativeSeconds(ws, LONG, 24000), 'plugin stream');

  const cut = tts.stream();
  cut.pushText(LONG + ' ' + LONG);
  cut.flush();
  const first = await cut.next();
  assert.ok(!first.done && first.value.frame.samplesPerChannel > 0, 'audio before the interruption');
  cut.close(); // barge-in: the plugin sends Flush and Close and drops the socket
  // The server gives the slot back: a new stream speaks at once.
  const again = tts.stream();
  again.pushText('Hello after the interruption.');
  again.flush();
  again.endInput();
  const more = [];
  for await (const ev of again) {
    if (typeof ev === 'symbol') break;
    more.push(ev.frame);
  }
  assert.ok(frameSeconds(more) > 0.5);
});

test('LiveKit plugin: synthesize() over TLS on port 443 of a random 127/8 address', async () => {
  const addr = `127.${1 + Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250)}.${2 + Math.floor(Math.random() * 250)}`;
  const { cert, key } = await makeCert(suite.dir, `IP:${addr}`);
  // The plugin's https.request uses the global agent: trust the test's
  // certificate there (what NODE_EXTRA_CA_CERTS does for a whole process).
  https.globalAgent.options.ca = readFileSync(cert);
  const tls = await suite.server('tls', DeepgramServer).start('--addr', `${addr}:443`, '--tls-cert', cert, '--tls-key', key);
  assert.equal(new URL(tls.base).port || "443", "443");
  // Its workspace by the admin command alone (the test's fetch does not
  // trust the certificate); the model is the catalog alias of the same
  // voice as on the plain server.
  const tkey = (await tls.workspace('pro', 'e2e-tls')).key;
  const tts = new lkdeepgram.TTS({ apiKey: tkey, baseUrl: tls.deepgram, model: ws.voice.alias, sampleRate: 16000 });
  const frames = [];
  for await (const ev of tts.synthesize(LONG)) frames.push(ev.frame);
  const want = await srv.nativeSeconds(ws, LONG, 16000);
  near(frameSeconds(frames), want, 'plugin synthesize');
});
