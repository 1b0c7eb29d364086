// A voice agent on voicesvc's realtime WebSocket (docs/realtime.md): it
// streams a language model's tokens into one context as they come, plays
// the audio as it arrives, follows the words being spoken, and when the
// user barges in, cancels and reads from the receipt what was heard.
//
// Run it (Node 20 or newer) against a server (`make run` prints a key and a
// voice id):
//
//   npm ci --prefix examples      # once: the ws package, for Node 20's lack of WebSocket
//   VOICESVC_URL=http://127.0.0.1:8080 VOICESVC_KEY=vsk_... VOICESVC_VOICE=<voice id> \
//     node examples/realtime-agent.mjs
//
// It prints one JSON line: the receipt of the barge-in and what was heard.
// It needs nothing but a WebSocket and fetch, so the same code runs in a
// browser; Node 22 and newer have a WebSocket of their own and need no
// install, Node 20 takes the one of the ws package (examples/package.json).

const base = process.env.VOICESVC_URL ?? 'http://127.0.0.1:8080';
const api = base + '/voice-svc/api/v1/public';
const key = process.env.VOICESVC_KEY;
const voice = process.env.VOICESVC_VOICE;
const bargeInAfter = Number(process.env.BARGE_IN_AFTER_S ?? 1.5); // seconds of audio
if (!key || !voice) {
  console.error('set VOICESVC_KEY (an API key) and VOICESVC_VOICE (a ready voice id); see the top of this file');
  process.exit(2);
}
const WebSocket = globalThis.WebSocket ?? (await import('ws').catch(() => ({}))).WebSocket;
if (!WebSocket) {
  console.error(`Node ${process.version} has no WebSocket: run \`npm ci --prefix examples\` once (the ws package), or use Node 22+`);
  process.exit(2);
}

// 1. A single-use access token, so the socket never carries the API key
//    (a browser gets it from its own backend the same way).
const tok = await fetch(api + '/tokens', {
  method: 'POST', headers: { 'X-API-Key': key, 'Content-Type': 'application/json' }, body: '{}',
}).then((r) => r.json());
if (!tok.data?.token) {
  console.error('could not make an access token:', JSON.stringify(tok));
  process.exit(1);
}
const ws = new WebSocket(api.replace(/^http/, 'ws') + '/stream', ['service.v1', tok.data.token]);
ws.binaryType = 'arraybuffer';
await new Promise((ok, fail) => { ws.onopen = ok; ws.onerror = fail; });

// 2. One context, text to come: raw 16-bit PCM at 16 kHz and word timestamps.
const reply = 'Sure. The train to Lyon leaves at nine fifteen from platform four, ' +
  'and the next one is at ten thirty. Would you like me to book a seat?';
let sent = '';
ws.send(JSON.stringify({ type: 'task_start', context_id: 'turn-1', voice_id: voice, text: '',
  output_format: 's16le', sample_rate: 16000, timestamps: true }));

// 3. The "language model": a token every 40 ms, finalized at the end.
const tokens = reply.match(/\S+\s*/g);
const feeder = setInterval(() => {
  const t = tokens.shift();
  if (t === undefined) return clearInterval(feeder);
  sent += t;
  ws.send(JSON.stringify({ type: 'task_continue', context_id: 'turn-1', text: t, finalize: tokens.length === 0 }));
}, 40);

// 4. Audio and words as they come; at bargeInAfter seconds of audio the
//    user speaks over the agent: cancel at once.
let audio = 0, cancelled = false;
const words = [];
const receipt = await new Promise((done) => {
  ws.onmessage = (e) => {
    if (typeof e.data !== 'string') return; // the audio bytes: hand them to your player
    const m = JSON.parse(e.data);
    switch (m.type) {
      case 'audio_chunk':
        audio += m.audio_duration_s;
        if (!cancelled && audio >= bargeInAfter) {
          cancelled = true;
          clearInterval(feeder);
          ws.send(JSON.stringify({ type: 'task_cancel', context_id: 'turn-1' }));
        }
        break;
      case 'word_timestamps':
        words.push(...m.words); // {word, start_s, end_s, char_start, char_end}
        break;
      case 'task_cancelled':
      case 'task_done':
        done(m);
        break;
      case 'error':
        console.error('error frame', m);
        break;
    }
  };
});

// 5. What the listener heard: the text up to spoken_until (code points),
//    to put in the conversation history instead of the whole reply.
const heard = Array.from(sent).slice(0, receipt.spoken_until ?? Array.from(sent).length).join('');
ws.send(JSON.stringify({ type: 'session_end' }));
console.log(JSON.stringify({ type: receipt.type, audio_sent_s: receipt.audio_sent_s, spoken_until: receipt.spoken_until,
  heard, words: words.length }));
ws.close();
