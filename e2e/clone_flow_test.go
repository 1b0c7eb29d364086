package e2e

import (
	"math"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"voicesvc/codec"
	"voicesvc/e2e/harness"
	"voicesvc/engine/analysis"
)

// The clone flow on the real engine: every container clones, the voice
// becomes ready with a preview and speaks like the reference; clips the
// cloner cannot use fail their job (not the request) with a clear error.
func TestCloneFlow(t *testing.T) {
	srv := harness.Start(t, harness.Options{Args: []string{"--engine", "espeak", "--billing", "meter"}})
	_, key := harness.Workspace(t, srv.DB, "pro")
	api := srv.API
	text := clTexts["en"]

	type ok struct {
		name, voice string
		pitch       int
		ext         string
		effects     []string
	}
	good := []ok{
		{"wav-m-low", "en+m1", 25, "wav", nil},
		// MP3 at 44.1 kHz, as most MP3s are: 22.05 kHz MP3 (MPEG-2 LSF,
		// sox's default for espeak's rate) decodes noisily through
		// go-mp3 (HNR 10 dB against 17 dB for sox's decode of the same
		// file), enough to break VAD on some clips; a codec issue.
		{"mp3-f-high", "en+f2", 80, "mp3", []string{"rate", "44100"}},
		{"flac-m-deep", "en+m3", 50, "flac", []string{"pitch", "-200"}},
		{"opus-f-short", "en+f4", 50, "opus", []string{"pitch", "200"}},
	}
	spoken := 0
	for _, c := range good {
		path := clClip(t, c.voice, c.pitch, text, c.ext, c.effects...)
		start := time.Now()
		vid, jid := clStartClone(t, api, key, c.name, clRead(t, path))
		j := clWaitJob(t, api, key, jid, 60*time.Second)
		took := time.Since(start)
		if j["status"] != "succeeded" || j["progress"] != 100.0 {
			t.Errorf("%s: job %v", c.name, j)
			continue
		}
		v := clVoice(t, api, key, vid)
		if v["status"] != "ready" {
			t.Errorf("%s: voice %v", c.name, v)
			continue
		}
		t.Logf("%s: 202 -> succeeded in %v", c.name, took.Round(time.Millisecond))
		// The preview is public: no key.
		url, _ := v["sample_audio_url"].(string)
		if !strings.Contains(url, "/media/") {
			t.Errorf("%s: sample_audio_url %q", c.name, url)
		} else {
			r := clDo(t, "GET", srv.URL+url[strings.Index(url, "/media/"):], "", "", nil)
			if r.status != 200 || r.header.Get("Content-Type") != "audio/wav" || len(r.raw) < 10000 {
				t.Errorf("%s: preview %d %q %d bytes", c.name, r.status, r.header.Get("Content-Type"), len(r.raw))
			}
		}
		// It speaks through the engine, and like the reference (the full
		// 8-speaker table is engine/espeak TestEnrollMatching).
		r := clJSON(t, "POST", api+"/voices/"+vid+"/speak", key, map[string]any{"text": text})
		if r.status != 200 {
			t.Errorf("%s: speak %d %s", c.name, r.status, r.raw)
			continue
		}
		// Cloning is free: only the speak requests were metered.
		spoken += len([]rune(text))
		if got := r.header.Get("X-Billing-Remaining"); got != strconv.Itoa(1_000_000-spoken) {
			t.Errorf("%s: X-Billing-Remaining %s after %d spoken characters and the clones", c.name, got, spoken)
		}
		cloneS, cloneRate, err := codec.DecodeClip(r.raw)
		if err != nil {
			t.Fatal(err)
		}
		refS, refRate, err := codec.DecodeClip(clRead(t, path))
		if err != nil {
			t.Fatal(err)
		}
		ref, err1 := analysis.Analyze(refS, refRate)
		got, err2 := analysis.Analyze(cloneS, cloneRate)
		if err1 != nil || err2 != nil {
			t.Fatalf("%s: analysis: %v %v", c.name, err1, err2)
		}
		f0 := 100 * (got.F0Median/ref.F0Median - 1)
		fs := 100 * (analysis.FormantScale(got, ref) - 1)
		t.Logf("%s: F0 %.1f -> %.1f (%+.1f%%), formant scale %+.1f%%", c.name, ref.F0Median, got.F0Median, f0, fs)
		if math.Abs(f0) > 10 || math.Abs(fs) > 10 {
			t.Errorf("%s: the cloned voice is off: F0 %+.1f%%, formant scale %+.1f%%", c.name, f0, fs)
		}
	}

	wavHead := clRead(t, clClip(t, "en+m3", 50, text, "wav"))[:44]
	bad := []struct {
		name, code, says string
		clip             []byte
	}{
		{"3 seconds", "clip_unusable", "continuous speech", clRead(t, clClip(t, "en+m3", 50, text, "wav", "trim", "0", "3"))},
		{"silence", "clip_unusable", "speech", clRead(t, clSox(t, "silence", "trim", "0", "10"))},
		{"noise", "clip_unusable", "speech", clRead(t, clSox(t, "noise", "synth", "10", "whitenoise", "vol", "0.5"))},
		{"unknown binary", "unsupported_audio", "WAV, MP3, FLAC or Ogg Opus", []byte{0, 1, 2, 3, 0xfe, 0x80, 9, 9, 9, 9}},
		{"broken flac", "corrupt_audio", "decoded", append([]byte("fLaC"), make([]byte, 300)...)},
		{"truncated wav", "corrupt_audio", "decoded", append(append([]byte(nil), wavHead[:20]...), 1, 2, 3)},
	}
	for _, c := range bad {
		vid, jid := clStartClone(t, api, key, c.name, c.clip)
		j := clWaitJob(t, api, key, jid, 30*time.Second)
		e, _ := j["error"].(map[string]any)
		if j["status"] != "failed" || e == nil || e["code"] != c.code || !strings.Contains(e["message"].(string), c.says) {
			t.Errorf("%s: job %v, want failed %s mentioning %q", c.name, j, c.code, c.says)
		}
		if v := clVoice(t, api, key, vid); v["status"] != "failed" {
			t.Errorf("%s: voice status %v, want failed", c.name, v["status"])
		}
		t.Logf("%s: %v: %v", c.name, e["code"], e["message"])
	}

	// A failed voice can be enrolled again; a ready one is busy.
	vid, jid := clStartClone(t, api, key, "retry", clRead(t, clClip(t, "en+m3", 50, text, "wav", "trim", "0", "3")))
	clWaitJob(t, api, key, jid, 30*time.Second)
	form := clForm{fields: [][2]string{{"consent", "true"}}, file: clRead(t, clClip(t, "en+m3", 50, text, "wav")), filename: "a.wav"}
	r := clUpload(t, api+"/voices/"+vid+"/enroll", key, form)
	clWant(t, "re-enroll failed voice", r, 202, "")
	if j := clWaitJob(t, api, key, r.data()["job_id"].(string), 60*time.Second); j["status"] != "succeeded" {
		t.Errorf("re-enroll: %v", j)
	}
	clWant(t, "enroll ready voice", clUpload(t, api+"/voices/"+vid+"/enroll", key, form), 409, "voice_busy")

	// Idempotency-Key: the retry replays the first answer, one job.
	f := clCloneForm("idem", clRead(t, clClip(t, "en+m3", 50, text, "wav")))
	r1 := clUpload(t, api+"/voices/clone", key, f, "Idempotency-Key", "clone-idem-1")
	r2 := clUpload(t, api+"/voices/clone", key, f, "Idempotency-Key", "clone-idem-1")
	if r1.status != 202 || r2.status != 202 || r2.header.Get("Idempotent-Replayed") != "true" ||
		r1.data()["job_id"] != r2.data()["job_id"] {
		t.Errorf("idempotent clone: %d %s / %d %s", r1.status, r1.raw, r2.status, r2.raw)
	}
}

// BenchmarkCloneLatency: the time from 202 to succeeded for a ~15-second
// clip through the real server (issue target: 2 s), and the time to the 202.
func BenchmarkCloneLatency(b *testing.B) {
	srv := harness.Start(b, harness.Options{Args: []string{"--engine", "espeak"}})
	_, key := harness.Workspace(b, srv.DB, "pro")
	clip := clRead(b, clClip(b, "en+f5", 50, clTexts["en"], "wav"))
	s, rate, err := codec.DecodeClip(clip)
	if err != nil {
		b.Fatal(err)
	}
	var accepted, finished []float64
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		_, jid := clStartClone(b, srv.API, key, "latency", clip)
		at := time.Since(start)
		j := clWaitJob(b, srv.API, key, jid, 30*time.Second)
		if j["status"] != "succeeded" {
			b.Fatalf("job %v", j)
		}
		accepted = append(accepted, float64(at.Microseconds())/1000)
		finished = append(finished, float64((time.Since(start)-at).Microseconds())/1000)
	}
	b.ReportMetric(float64(len(s))/float64(rate), "clip_s")
	b.ReportMetric(median(accepted), "ms_to_202")
	b.ReportMetric(median(finished), "ms_202_to_succeeded")
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = append([]float64(nil), v...)
	sort.Float64s(v)
	return v[len(v)/2]
}
