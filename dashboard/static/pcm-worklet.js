// pcm-player: an AudioWorklet processor that plays mono float PCM as it
// arrives from the page, and reports how many samples it has played, so
// that the page can tell which word is being spoken (and tests can tell
// that audio really reached the audio graph).
class PCMPlayer extends AudioWorkletProcessor {
  constructor() {
    super();
    this.queue = [];
    this.offset = 0;
    this.played = 0;
    this.quanta = 0;
    this.port.onmessage = (e) => {
      if (e.data === 'reset') { this.queue = []; this.offset = 0; return; }
      this.queue.push(e.data);
    };
  }

  process(inputs, outputs) {
    const out = outputs[0][0];
    let i = 0;
    while (i < out.length && this.queue.length) {
      const head = this.queue[0];
      const n = Math.min(out.length - i, head.length - this.offset);
      out.set(head.subarray(this.offset, this.offset + n), i);
      i += n;
      this.offset += n;
      this.played += n;
      if (this.offset >= head.length) { this.queue.shift(); this.offset = 0; }
    }
    out.fill(0, i);
    // About every 23 ms at 22 kHz: often enough to follow words.
    if (++this.quanta % 4 === 0 || (i > 0 && !this.queue.length)) {
      this.port.postMessage({ played: this.played, queued: this.queue.length });
    }
    return true;
  }
}

registerProcessor('pcm-player', PCMPlayer);
