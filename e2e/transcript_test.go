package e2e

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"

	"voicesvc/e2e/harness"
	"voicesvc/internal/wstranscript"
)

// The transcript in docs/realtime.md#transcript is a real session: this
// test records it again (internal/wstranscript, the code behind
// scripts/wstranscript) against the real binary with the built-in engine
// and a fresh pro workspace, and fails when realtime.md shows anything else.
// What changes from run to run (request and trace ids, the profile's
// timings) is compared as a placeholder. To rewrite the transcript in
// realtime.md from the recording:
//
//	VOICESVC_UPDATE_DOCS=1 go test ./e2e -run TestRealtimeTranscript
const realtimeDoc = "../docs/realtime.md"

var trVolatile = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`req_[0-9a-f]{24}`), "req_…"},
	{regexp.MustCompile(`"trace_id":"[0-9a-f]+"`), `"trace_id":"…"`},
	{regexp.MustCompile(`"profile":\{[^}]*\}`), `"profile":{…}`},
}

func trNormalize(s string) string {
	for _, v := range trVolatile {
		s = v.re.ReplaceAllString(s, v.with)
	}
	return s
}

// trBlock returns the bounds of the body of the first fenced block after
// the "## Transcript" heading.
func trBlock(t *testing.T, doc string) (start, end int) {
	t.Helper()
	h := strings.Index(doc, "\n## Transcript\n")
	if h < 0 {
		t.Fatal("realtime.md has no \"## Transcript\" section")
	}
	open := strings.Index(doc[h:], "\n```\n")
	if open < 0 {
		t.Fatal("realtime.md: no fenced block in the Transcript section")
	}
	start = h + open + len("\n```\n")
	close := strings.Index(doc[start:], "```\n")
	if close < 0 {
		t.Fatal("realtime.md: the transcript's block is not closed")
	}
	return start, start + close
}

func TestRealtimeTranscript(t *testing.T) {
	srv := harness.Start(t, harness.Options{Args: []string{"--engine", "espeak"}})
	_, key := harness.Workspace(t, srv.DB, "pro")
	voice, err := wstranscript.VoiceID(srv.URL, key, "en-us-linda")
	if err != nil {
		t.Fatal(err)
	}
	var rec bytes.Buffer
	if err := wstranscript.Record(&rec, srv.URL, key, voice); err != nil {
		t.Fatalf("%v\n%s", err, rec.String())
	}
	got := rec.String()
	// What the transcript is there to show (issue 28).
	for _, want := range []string{`"timestamps":true}`, `"type":"word_timestamps"`, `"type":"task_cancel"`,
		`"type":"task_cancelled"`, `"audio_sent_s":`, `"spoken_until":`, `"type":"session_ended"`, "S: <close 1000>"} {
		if !strings.Contains(got, want) {
			t.Errorf("the recorded session lacks %s:\n%s", want, got)
		}
	}
	b, err := os.ReadFile(realtimeDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start, end := trBlock(t, doc)
	if os.Getenv("VOICESVC_UPDATE_DOCS") == "1" {
		doc = doc[:start] + got + doc[end:]
		if err := os.WriteFile(realtimeDoc, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote the transcript in %s", realtimeDoc)
		return
	}
	// The prose after the block cites the receipt's values: they must be
	// those recorded.
	notes := doc[end:]
	if i := strings.Index(notes, "\n## "); i >= 0 {
		notes = notes[:i]
	}
	for _, field := range []string{"audio_sent_s", "spoken_until"} {
		cited := regexp.MustCompile("`" + field + "` ([0-9.]+)").FindStringSubmatch(notes)
		recorded := regexp.MustCompile(`"` + field + `":([0-9.]+)`).FindStringSubmatch(got)
		if cited == nil || recorded == nil || cited[1] != recorded[1] {
			t.Errorf("realtime.md's notes cite %s %v, the session recorded %v", field, cited, recorded)
		}
	}
	if trNormalize(doc[start:end]) == trNormalize(got) {
		return
	}
	have, want := strings.Split(trNormalize(doc[start:end]), "\n"), strings.Split(trNormalize(got), "\n")
	for i := 0; i < max(len(have), len(want)); i++ {
		var h, w string
		if i < len(have) {
			h = have[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if h != w {
			t.Fatalf("docs/realtime.md's transcript differs from a real session at line %d:\n realtime.md: %s\n recorded:    %s\n"+
				"(rewrite it with VOICESVC_UPDATE_DOCS=1 go test ./e2e -run TestRealtimeTranscript, then check its prose)\nrecorded:\n%s",
				i+1, h, w, got)
		}
	}
}
