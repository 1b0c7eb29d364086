// End-to-end test of the ElevenLabs dialect (issue 30, docs/dialects.md):
// the real voicesvc binary, driven by the official @elevenlabs/elevenlabs-js
// client pointed at base URL {api_root}/compat/elevenlabs, its sockets
// driven with `ws` as its protocol documents them (the client has no
// text-to-speech socket helper), and LiveKit's ElevenLabs TTS plugin used
// standalone. Run by `make test` (target test-e2e):
//
//   cd e2e/elevenlabs && npm ci && VOICESVC_BIN=/path/to/voicesvc npm test
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { ElevenLabsClient, ElevenLabsError } from '@elevenlabs/elevenlabs-js';
import WebSocket from 'ws';
import { Suite } from '../lib/server.mjs';

const suite = new Suite('voicesvc-e2e-el-');
const srv = suite.server();

let apiRoot; // http://ADDR/voice-svc/api/v1/public
let key; // a pro workspace's API key
let voice; // an English catalog voice's alias

before(async () => {
  await srv.start();
  apiRoot = srv.api;
  key = (await srv.workspace('pro', 'e2e-elevenlabs')).key;
  const en = await srv.englishVoices(key);
  assert.ok(en.length >= 1, 'an English catalog voice');
  voice = en[0].alias;
});

after(() => suite.close());

const client = (k = key) => new ElevenLabsClient({ apiKey: k, baseUrl: apiRoot + '/compat/elevenlabs', maxRetries: 0 });

// More than five seconds of speech.
const TEXT = 'Hello from the ElevenLabs dialect of voicesvc. This text is long enough to last for more than five ' +
  'seconds of speech, so that durations can be compared closely. It ends with a third sentence, spoken calmly.';

async function collect(stream) {
  const parts = [];
  for await (const c of stream) parts.push(Buffer.from(c));
  return Buffer.concat(parts);
}

// nativeSeconds is the duration of TEXT through voicesvc's own speak.
async function nativeSeconds() {
  const res = await fetch(`${apiRoot}/voices/${voice}/speak`, {
    method: 'POST', headers: { 'X-API-Key': key, 'Content-Type': 'application/json' },
    body: JSON.stringify({ text: TEXT, output_format: 's16le', sample_rate: 16000 }),
  });
  assert.equal(res.status, 200);
  const b = Buffer.from(await res.arrayBuffer());
  return b.length / 2 / 16000;
}

// mp3Samples counts the samples of the MPEG-1 layer III frames of b.
function mp3Samples(b) {
  const rates = [44100, 48000, 32000];
  const kbps = [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320];
  let i = 0;
  let n = 0;
  let rate = 0;
  if (b.subarray(0, 3).toString() === 'ID3') i = 10 + ((b[6] << 21) | (b[7] << 14) | (b[8] << 7) | b[9]);
  while (i + 4 <= b.length) {
    assert.ok(b[i] === 0xff && (b[i + 1] & 0xfe) === 0xfa, `frame header at ${i}`);
    rate = rates[(b[i + 2] >> 2) & 3];
    const len = Math.floor((144 * kbps[b[i + 2] >> 4] * 1000) / rate) + ((b[i + 2] >> 1) & 1);
    i += len;
    n += 1152;
  }
  return { n, rate };
}

function rmsS16(buf) {
  const n = Math.floor(buf.length / 2);
  let sum = 0;
  for (let i = 0; i < n; i++) {
    const x = buf.readInt16LE(2 * i) / 32768;
    sum += x * x;
  }
  return Math.sqrt(sum / Math.max(n, 1));
}

const within2 = (got, want, what) =>
  assert.ok(Math.abs(got - want) <= 0.02 * want, `${what}: ${got.toFixed(3)} s, native ${want.toFixed(3)} s`);

test('convert: MP3, PCM at 16, 22.05, 24 and 44.1 kHz, mu-law 8 kHz, within 2% of native speak', async () => {
  const native = await nativeSeconds();
  assert.ok(native >= 5, `the text lasts ${native} s`);
  const el = client();
  for (const [format, width, rate] of [['pcm_16000', 2, 16000], ['pcm_22050', 2, 22050], ['pcm_24000', 2, 24000],
    ['pcm_44100', 2, 44100], ['ulaw_8000', 1, 8000]]) {
    const audio = await collect(await el.textToSpeech.convert(voice, { text: TEXT, modelId: 'eleven_multilingual_v2', outputFormat: format }));
    within2(audio.length / width / rate, native, format);
    if (width === 2) assert.ok(rmsS16(audio) > 0.02, `${format} is not silent`);
  }
  const mp3 = await collect(await el.textToSpeech.convert(voice, { text: TEXT, outputFormat: 'mp3_44100_128' }));
  const { n, rate } = mp3Samples(mp3);
  assert.equal(rate, 44100);
  // LAME's delay (576 + 529 samples) and padding (up to a frame).
  const seconds = (n - 1105) / rate;
  assert.ok(Math.abs(seconds - native) <= 0.02 * native + 1152 / rate, `mp3: ${seconds.toFixed(3)} s, native ${native.toFixed(3)} s`);

  // The default format is MP3 too.
  const def = await collect(await el.textToSpeech.convert(voice, { text: 'Hello.' }));
  assert.equal(mp3Samples(def).rate, 44100);
});

test('stream', async () => {
  const native = await nativeSeconds();
  const audio = await collect(await client().textToSpeech.stream(voice, {
    text: TEXT, outputFormat: 'pcm_16000', voiceSettings: { stability: 0.5, similarityBoost: 0.75 },
  }));
  within2(audio.length / 2 / 16000, native, 'stream pcm_16000');
});

function checkAlignment(al, text, total) {
  assert.equal(al.characters.join(''), text);
  assert.equal(al.characterStartTimesSeconds.length, al.characters.length);
  assert.equal(al.characterEndTimesSeconds.length, al.characters.length);
  let last = 0;
  for (let i = 0; i < al.characters.length; i++) {
    const s = al.characterStartTimesSeconds[i];
    const e = al.characterEndTimesSeconds[i];
    assert.ok(s >= last && e >= s && e <= total + 0.002, `character ${i} at ${s}-${e} after ${last} (audio ${total} s)`);
    last = s;
  }
}

test('convert and stream with timestamps: characters join to the text, times never go back', async () => {
  const el = client();
  const r = await el.textToSpeech.convertWithTimestamps(voice, { text: TEXT, outputFormat: 'pcm_24000' });
  const audio = Buffer.from(r.audioBase64, 'base64');
  checkAlignment(r.alignment, TEXT, audio.length / 2 / 24000);
  checkAlignment(r.normalizedAlignment, TEXT, audio.length / 2 / 24000);

  const chunks = [];
  for await (const c of await el.textToSpeech.streamWithTimestamps(voice, { text: TEXT, outputFormat: 'pcm_24000' })) {
    chunks.push(c);
  }
  assert.ok(chunks.length > 2, `${chunks.length} chunks`);
  const joined = { characters: [], characterStartTimesSeconds: [], characterEndTimesSeconds: [] };
  let bytes = 0;
  for (const c of chunks) {
    bytes += Buffer.from(c.audioBase64, 'base64').length;
    for (const k of Object.keys(joined)) joined[k].push(...(c.alignment?.[k] ?? []));
  }
  checkAlignment(joined, TEXT, bytes / 2 / 24000);
});

test('voices, models, subscription', async () => {
  const el = client();
  const { voices } = await el.voices.getAll();
  assert.ok(voices.some((v) => v.voiceId === voice && v.category === 'premade'), 'the catalog voice is listed');
  const models = await el.models.list();
  assert.equal(models[0].modelId, 'service-v1');
  assert.ok(models[0].canDoTextToSpeech);
  // Usage reaches the store at the server's lease syncs (every 500 ms): read
  // it settled, before and after.
  const settled = async () => {
    let last = await el.user.subscription.get();
    for (let i = 0; i < 20; i++) {
      await new Promise((resolve) => setTimeout(resolve, 1200));
      const now = await el.user.subscription.get();
      if (now.characterCount === last.characterCount) return now;
      last = now;
    }
    return last;
  };
  const before = await settled();
  await collect(await el.textToSpeech.convert(voice, { text: 'Twelve chars', outputFormat: 'pcm_16000' }));
  const after = await settled();
  assert.equal(after.characterCount - before.characterCount, 12);
  assert.equal(after.tier, 'pro');
  assert.ok(after.characterLimit > 0);
});

test('errors take the vendor shape', async () => {
  await assert.rejects(client('vsk_nope').textToSpeech.convert(voice, { text: 'Hi.' }), (e) => {
    assert.ok(e instanceof ElevenLabsError);
    assert.equal(e.statusCode, 401);
    assert.equal(e.body.detail.status, 'invalid_api_key');
    return true;
  });
  await assert.rejects(client().textToSpeech.convert('21m00Tcm4TlvDq8ikWAM', { text: 'Hi.' }), (e) => {
    assert.equal(e.statusCode, 404);
    assert.equal(e.body.detail.status, 'voice_not_found');
    return true;
  });
});

// openSocket dials a socket with the key in the xi-api-key header (or
// the headers given).
function openSocket(tail, query, headers = { 'xi-api-key': key }) {
  const url = `${apiRoot.replace('http', 'ws')}/compat/elevenlabs/v1/text-to-speech/${voice}/${tail}?${query}`;
  const ws = new WebSocket(url, { headers });
  const messages = [];
  const waiters = [];
  ws.on('message', (data) => {
    messages.push(JSON.parse(data.toString()));
    for (const w of waiters.splice(0)) w();
  });
  const closed = new Promise((resolve) => ws.on('close', (code) => resolve(code)));
  const opened = new Promise((resolve, reject) => { ws.on('open', resolve); ws.on('error', reject); });
  // until resolves once pred holds over the messages so far.
  const until = async (pred) => {
    const deadline = Date.now() + 20_000;
    while (!pred(messages)) {
      assert.ok(Date.now() < deadline, 'timed out: ' + JSON.stringify(messages.slice(-3)).slice(0, 300));
      await new Promise((resolve) => { waiters.push(resolve); setTimeout(resolve, 200); });
    }
  };
  return { ws, messages, closed, opened, until, send: (m) => ws.send(JSON.stringify(m)) };
}

test('stream-input: text in pieces, flush, the closing empty text', async () => {
  const s = openSocket('stream-input', 'model_id=eleven_flash_v2_5&output_format=pcm_16000');
  await s.opened;
  s.send({ text: ' ', voice_settings: { stability: 0.5, similarity_boost: 0.8 }, generation_config: { chunk_length_schedule: [50, 120] } });
  for (const piece of ['Hello there, ', 'this is the stream-input ', 'socket speaking. ', 'It ends here. ']) s.send({ text: piece });
  s.send({ text: '', flush: true });
  s.send({ text: '' });
  await s.until((ms) => ms.some((m) => m.isFinal));
  assert.equal(await s.closed, 1000);
  const audio = Buffer.concat(s.messages.filter((m) => m.audio).map((m) => Buffer.from(m.audio, 'base64')));
  assert.ok(audio.length > 16000, `${audio.length} bytes`);
  assert.ok(s.messages.every((m) => !m.error), JSON.stringify(s.messages.find((m) => m.error)));
  const chars = s.messages.flatMap((m) => m.alignment?.chars ?? []).join('');
  assert.match(chars, /Hello there,/);
});

test('multi-stream-input: two contexts, flush, close_context', async () => {
  const s = openSocket('multi-stream-input', 'output_format=pcm_22050&sync_alignment=true');
  await s.opened;
  for (const id of ['one', 'two']) s.send({ text: ' ', context_id: id });
  s.send({ context_id: 'one', text: 'The first context. ', flush: true });
  s.send({ context_id: 'two', text: 'The second context, ' });
  s.send({ context_id: 'two', text: 'in two pieces. ', flush: true });
  for (const id of ['one', 'two']) s.send({ context_id: id, close_context: true });
  await s.until((ms) => ['one', 'two'].every((id) => ms.some((m) => m.isFinal && m.contextId === id)));
  for (const id of ['one', 'two']) {
    const audio = s.messages.filter((m) => m.contextId === id && m.audio);
    assert.ok(audio.length > 0, `${id} has audio`);
  }
  s.send({ close_socket: true });
  assert.equal(await s.closed, 1000);
});

test('the key in the first message, as the vendor documents it', async () => {
  const s = openSocket('stream-input', 'output_format=pcm_16000', {});
  await s.opened;
  s.send({ text: ' ', xi_api_key: key, generation_config: { chunk_length_schedule: [50] } });
  s.send({ text: 'The key came in the first message. ', flush: true });
  s.send({ text: '' });
  await s.until((ms) => ms.some((m) => m.isFinal));
  assert.equal(await s.closed, 1000);
  assert.ok(s.messages.every((m) => !m.error), JSON.stringify(s.messages.find((m) => m.error)));
  assert.ok(s.messages.some((m) => m.audio));

  // A bad key: one fatal error message, then the close 4401.
  const bad = openSocket('multi-stream-input', 'output_format=pcm_16000', {});
  await bad.opened;
  bad.send({ text: ' ', context_id: 'a', xi_api_key: 'vsk_nope' });
  assert.equal(await bad.closed, 4401);
  assert.equal(bad.messages.length, 1);
  assert.equal(bad.messages[0].error, 'unauthorized');
  assert.equal(bad.messages[0].fatal, true);
});

test('LiveKit plugin: synthesize() and a stream interrupted mid-sentence', async () => {
  const { initializeLogger } = await import('@livekit/agents');
  initializeLogger({ pretty: false, level: 'warn' });
  const { TTS } = await import('@livekit/agents-plugin-elevenlabs');
  const tts = new TTS({ apiKey: key, baseURL: apiRoot + '/compat/elevenlabs/v1', voiceId: voice, encoding: 'pcm_22050' });
  try {
    // synthesize(): POST .../stream with the plugin's body.
    let samples = 0;
    for await (const ev of tts.synthesize('Hello from LiveKit, through voicesvc.')) samples += ev.frame.samplesPerChannel;
    assert.ok(samples > 22050 / 2, `${samples} samples`);

    // A stream interrupted mid-sentence: its first audio, then closed.
    const interrupted = tts.stream();
    interrupted.pushText('This sentence is interrupted before it can end, because the user spoke over the agent and');
    interrupted.flush();
    for await (const ev of interrupted) {
      if (typeof ev === 'object' && ev.frame) break;
    }
    interrupted.close();

    // The next turn on the same connection speaks whole.
    const turn = tts.stream();
    turn.pushText('A new turn starts. It is spoken to the end.');
    turn.endInput();
    samples = 0;
    for await (const ev of turn) {
      if (typeof ev === 'object' && ev.frame) samples += ev.frame.samplesPerChannel;
    }
    assert.ok(samples > 22050, `${samples} samples`);
  } finally {
    await tts.close();
  }
});
