package gateway

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"voicesvc/codec"
	"voicesvc/control"
)

// quietFLACDecoder silences the log lines mewkiz/flac prints for every frame
// at 24 kHz ("test cases do not yet include ... 24000") while t runs.
func quietFLACDecoder(t *testing.T) {
	prev := log.Writer()
	log.SetOutput(io.Discard)
	t.Cleanup(func() { log.SetOutput(prev) })
}

// compatText has 35 non-space characters: 2.1 s of the reference engine.
const compatText = "Hello there. This is the compatible endpoint."

// noStreamKey is a key of a pro workspace without the streaming feature,
// and a ready voice of it: its compat answers are buffered whole.
func (ss *synthServer) noStreamKey() (key, voice string) {
	ss.t.Helper()
	off := false
	w := &control.Workspace{Name: "nostream", Plan: "pro", Streaming: &off}
	if err := ss.store.CreateWorkspace(context.Background(), w); err != nil {
		ss.t.Fatal(err)
	}
	return ss.newKey(w.ID, nil, 0, false), ss.readyVoice(w.ID, "en")
}

// runTool runs an installed command-line tool on b (written to a file
// named name) and returns its combined output; the test is skipped when the
// tool is not installed.
func runTool(t *testing.T, b []byte, name string, tool string, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath(tool); err != nil {
		t.Skipf("%s is not installed", tool)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(tool, append(args, path)...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v on %d bytes: %v\n%s", tool, args, len(b), err, out)
	}
	return string(out)
}

// TestCompatOpusFLAC: response_format opus is an Ogg Opus file (OggS,
// OpusHead, valid to opusinfo) and flac a FLAC file (fLaC, valid to
// flac -t), streamed and buffered; both decode to the pcm answer's duration.
func TestCompatOpusFLAC(t *testing.T) {
	quietFLACDecoder(t)
	ss := newSynthServer(t, synthOpts{})
	nsKey, nsVoice := ss.noStreamKey()
	_, pcm := ss.compatDo(map[string]any{"model": "tts-1", "voice": ss.voice, "input": compatText, "response_format": "pcm"},
		bearerHdr(ss.key)...)
	want := float64(len(pcm)/2) / 24000
	for _, tc := range []struct {
		format, ctype, magic string
		tool                 []string
	}{
		{"opus", "audio/ogg", "OggS", []string{"opusinfo"}},
		{"flac", "audio/flac", "fLaC", []string{"flac", "-t", "-s"}},
	} {
		for _, buffered := range []bool{false, true} {
			key, voice := ss.key, ss.voice
			if buffered {
				key, voice = nsKey, nsVoice
			}
			resp, b := ss.compatDo(map[string]any{"model": "tts-1", "voice": voice, "input": compatText,
				"response_format": tc.format}, bearerHdr(key)...)
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != tc.ctype || !bytes.HasPrefix(b, []byte(tc.magic)) {
				t.Fatalf("%s buffered=%v: %d %s: % x", tc.format, buffered, resp.StatusCode, resp.Header.Get("Content-Type"), b[:min(len(b), 16)])
			}
			if streamed := len(resp.TransferEncoding) > 0; streamed == buffered {
				t.Errorf("%s buffered=%v: transfer encoding %v", tc.format, buffered, resp.TransferEncoding)
			}
			if tc.format == "opus" && !bytes.Contains(b[:min(len(b), 64)], []byte("OpusHead")) {
				t.Errorf("opus: no OpusHead in the first page")
			}
			out := runTool(t, b, "audio."+tc.format, tc.tool[0], tc.tool[1:]...)
			if tc.format == "opus" && !strings.Contains(out, "Opus stream") {
				t.Errorf("opusinfo: %s", out)
			}
			s, rate, err := codec.DecodeClip(b)
			d := float64(len(s)) / float64(max(rate, 1))
			if err != nil || rms(s) < 0.05 || d < want-0.03 || d > want+0.03 {
				t.Errorf("%s buffered=%v: %.3f s at %d Hz (want %.3f), rms %.3f, %v", tc.format, buffered, d, rate, want, rms(s), err)
			}
		}
	}
}

// TestCompatSpeed: speed is a rate multiplier the engine honours; the
// reference engine's duration is divided by it exactly.
func TestCompatSpeed(t *testing.T) {
	ss := newSynthServer(t, synthOpts{})
	var base int
	for _, sp := range []float64{1, 0.25, 0.5, 2, 4} {
		resp, b := ss.compatDo(map[string]any{"model": "tts-1", "voice": ss.voice, "input": compatText,
			"response_format": "pcm", "speed": sp}, bearerHdr(ss.key)...)
		if resp.StatusCode != 200 {
			t.Fatalf("speed %g: %d %s", sp, resp.StatusCode, b)
		}
		if sp == 1 {
			base = len(b)
			continue
		}
		if r := float64(base) / float64(len(b)); r < sp*0.95 || r > sp*1.05 {
			t.Errorf("speed %g: %d bytes against %d at 1 (ratio %.3f)", sp, len(b), base, r)
		}
	}
}

// TestCompatStreamedWAV: a streamed wav cannot know its length when the
// header leaves, so its RIFF and data sizes are 0xFFFFFFFF, which sox reads
// to the end of the data; a buffered one has its exact sizes.
func TestCompatStreamedWAV(t *testing.T) {
	ss := newSynthServer(t, synthOpts{})
	nsKey, nsVoice := ss.noStreamKey()
	le := binary.LittleEndian
	for _, buffered := range []bool{false, true} {
		key, voice := ss.key, ss.voice
		if buffered {
			key, voice = nsKey, nsVoice
		}
		resp, b := ss.compatDo(map[string]any{"model": "tts-1", "voice": voice, "input": compatText, "response_format": "wav"},
			bearerHdr(key)...)
		if resp.StatusCode != 200 || len(b) < 44 {
			t.Fatalf("buffered=%v: %d, %d bytes", buffered, resp.StatusCode, len(b))
		}
		riff, data := le.Uint32(b[4:]), le.Uint32(b[40:])
		if buffered && (riff != uint32(len(b)-8) || data != uint32(len(b)-44)) ||
			!buffered && (riff != 0xFFFFFFFF || data != 0xFFFFFFFF) {
			t.Errorf("buffered=%v: RIFF size %#x, data size %#x, %d bytes", buffered, riff, data, len(b))
		}
		stat := runSoxStat(t, b)
		if want := (len(b) - 44) / 2; !strings.Contains(stat, "Samples read:") || soxSamples(stat) != want {
			t.Errorf("buffered=%v: sox read %d samples, want %d:\n%s", buffered, soxSamples(stat), want, stat)
		}
	}
}

// runSoxStat runs `sox FILE -n stat` and returns its report.
func runSoxStat(t *testing.T, b []byte) string {
	t.Helper()
	if _, err := exec.LookPath("sox"); err != nil {
		t.Skip("sox is not installed")
	}
	path := filepath.Join(t.TempDir(), "stat.wav")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("sox", path, "-n", "stat").CombinedOutput()
	if err != nil {
		t.Fatalf("sox stat: %v\n%s", err, out)
	}
	return string(out)
}

func soxSamples(stat string) int {
	for _, line := range strings.Split(stat, "\n") {
		if rest, ok := strings.CutPrefix(line, "Samples read:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(rest))
			if err != nil {
				return -1
			}
			return n
		}
	}
	return -1
}

// compatSSEEvents reads a stream_format "sse" answer: the decoded audio of
// its delta events, their count, and the done event's usage.
func compatSSEEvents(t *testing.T, body []byte) (audio []byte, deltas int, usage map[string]any) {
	t.Helper()
	events := strings.Split(string(body), "\n\n")
	if len(events) < 3 || events[len(events)-1] != "" {
		t.Fatalf("not events ending in a blank line: %.200q", body)
	}
	events = events[:len(events)-1]
	for i, ev := range events {
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok || strings.Contains(data, "\n") {
			t.Fatalf("event %d is not one data line: %.100q", i, ev)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		last := i == len(events)-1
		switch {
		case !last && m["type"] == "speech.audio.delta" && len(m) == 2:
			b, err := base64.StdEncoding.DecodeString(m["audio"].(string))
			if err != nil || len(b) == 0 {
				t.Fatalf("delta %d: %d bytes, %v", i, len(b), err)
			}
			audio = append(audio, b...)
			deltas++
		case last && m["type"] == "speech.audio.done" && len(m) == 2:
			usage, _ = m["usage"].(map[string]any)
		default:
			t.Fatalf("event %d of %d: %v", i, len(events), m)
		}
	}
	return audio, deltas, usage
}

// TestCompatSSE: stream_format "sse" carries exactly the bytes of the plain
// answer in every response_format, in several delta events, then the usage
// in characters; streamed, and whole for a plan without streaming (a wav
// with its true sizes).
func TestCompatSSE(t *testing.T) {
	quietFLACDecoder(t)
	ss := newSynthServer(t, synthOpts{})
	nsKey, nsVoice := ss.noStreamKey()
	text := compatText + " Ünïcödé counts code points."
	chars := float64(control.CountChars(text))
	formats := []string{"pcm", "wav", "opus", "flac", "mp3"}
	if !codec.MP3Available {
		formats = formats[:4]
	}
	for _, f := range formats {
		for _, buffered := range []bool{false, true} {
			key, voice := ss.key, ss.voice
			if buffered {
				key, voice = nsKey, nsVoice
			}
			body := map[string]any{"model": "tts-1", "voice": voice, "input": text, "response_format": f}
			_, plain := ss.compatDo(body, bearerHdr(key)...)
			body["stream_format"] = "sse"
			resp, b := ss.compatDo(body, bearerHdr(key)...)
			h := resp.Header
			if resp.StatusCode != 200 || h.Get("Content-Type") != "text/event-stream" || h.Get("Cache-Control") != "no-cache" ||
				h.Get("X-Billing-Remaining") == "" {
				t.Fatalf("%s buffered=%v: %d %v %.200s", f, buffered, resp.StatusCode, h, b)
			}
			audio, deltas, usage := compatSSEEvents(t, b)
			if deltas < 2 {
				t.Errorf("%s buffered=%v: %d delta events", f, buffered, deltas)
			}
			if usage["input_tokens"] != chars || usage["output_tokens"] != 0.0 || usage["total_tokens"] != chars {
				t.Errorf("%s: usage %v, want %v characters", f, usage, chars)
			}
			if f == "opus" || f == "mp3" {
				// Lossy encoders are not bit-exact across runs: compare the
				// decoded length instead.
				s1, _, err1 := codec.DecodeClip(plain)
				s2, _, err2 := codec.DecodeClip(audio)
				if err1 != nil || err2 != nil || len(s1) != len(s2) || rms(s2) < 0.05 {
					t.Errorf("%s buffered=%v: %d vs %d samples, %v %v", f, buffered, len(s1), len(s2), err1, err2)
				}
				continue
			}
			if !bytes.Equal(audio, plain) {
				t.Errorf("%s buffered=%v: the deltas carry %d bytes, the plain answer %d", f, buffered, len(audio), len(plain))
			}
		}
	}
}

// TestCompatLists: the models and voices listings, with the speech
// endpoint's credentials and error shape.
func TestCompatLists(t *testing.T) {
	ss := newSynthServer(t, synthOpts{})
	draft := ss.createVoice(ss.key, "draft")["id"].(string)
	other := newSynthServer(t, synthOpts{}).voice // another server's store: unknown here
	otherWS := ss.workspace("pro")
	foreign := ss.readyVoice(otherWS.ID, "en") // private to another workspace
	get := func(path string, hdr ...string) (int, []byte, map[string]any) {
		r := ss.do("GET", path, "", nil, hdr...)
		var m map[string]any
		_ = json.Unmarshal(r.body, &m)
		return r.status, r.body, m
	}
	for _, auth := range [][]string{bearerHdr(ss.key), {"X-API-Key", ss.key}} {
		st, b, m := get("/compat/models", auth...)
		data, _ := m["data"].([]any)
		if st != 200 || m["object"] != "list" || len(data) != 1 {
			t.Fatalf("models: %d %s", st, b)
		}
		model := data[0].(map[string]any)
		if model["id"] != "service-v1" || model["object"] != "model" || model["owned_by"] != "voicesvc" || model["created"].(float64) < 1e9 {
			t.Errorf("model %v", model)
		}

		st, b, m = get("/compat/audio/voices", auth...)
		voices, _ := m["voices"].([]any)
		if st != 200 || len(m) != 1 || len(voices) == 0 {
			t.Fatalf("voices: %d %s", st, b)
		}
		ids := map[string]map[string]any{}
		for _, v := range voices {
			v := v.(map[string]any)
			if len(v) != 3 || v["id"] == "" || v["name"] == nil || v["language"] == nil {
				t.Errorf("voice %v", v)
			}
			ids[v["id"].(string)] = v
		}
		if v := ids[ss.voice]; v == nil || v["language"] != "en" {
			t.Errorf("own ready voice %s missing: %v", ss.voice, ids)
		}
		for _, c := range ss.srv.engine.Catalog() {
			if ids[c.Alias] == nil {
				t.Errorf("catalog voice %q missing", c.Alias)
			}
		}
		for _, id := range []string{draft, other, foreign} {
			if ids[id] != nil {
				t.Errorf("voice %s listed: not usable", id)
			}
		}
		// Every listed id is one the speech endpoint takes.
		for id := range ids {
			resp, b := ss.compatDo(map[string]any{"model": "tts-1", "voice": id, "input": "Hi.", "response_format": "pcm"},
				auth...)
			if resp.StatusCode != 200 {
				t.Errorf("voice %q from the list: %d %s", id, resp.StatusCode, b)
			}
			break // one is enough; the loop order is random
		}
	}
	tok := ss.mintToken(ss.key, map[string]any{})
	for _, path := range []string{"/compat/models", "/compat/audio/voices"} {
		for _, tc := range []struct {
			hdr               []string
			status            int
			typ, code, reason string
		}{
			{nil, 401, "authentication_error", "", "no key"},
			{bearerHdr(tok), 401, "authentication_error", "", "access token"},
			{bearerHdr(ss.newKey(ss.ws.ID, []string{"voices:read"}, 0, false)), 403, "permission_error", "insufficient_scope", "scope"},
		} {
			r := ss.do("GET", path, "", nil, tc.hdr...)
			t.Run(path+" "+tc.reason, func(t *testing.T) {
				checkCompatError(t, &http.Response{StatusCode: r.status, Header: r.header}, r.body, tc.status, tc.typ, tc.code, "")
			})
		}
	}
}
