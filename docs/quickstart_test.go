package docs

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestIndexIsAQuickstart: the page served at /docs/ (README.md) walks a new
// user from make run to each way of speaking, in this order, and keeps the
// notes on how the pages are rendered in one last section. Its sh blocks
// are run against a real server by e2e.TestAPIExamples.
func TestIndexIsAQuickstart(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	headings := regexp.MustCompile(`(?m)^## (.+)$`).FindAllStringSubmatch(doc, -1)
	var hs []string
	for _, h := range headings {
		hs = append(hs, h[1])
	}
	// Each step: its heading, and what its section must show.
	steps := []struct {
		heading string
		want    []string
	}{
		{"1. Start the server", []string{"make run", "data/dev-credentials"}},
		{"2. The key", []string{"X-API-Key", "VOICESVC_KEY", "/voices"}},
		{"3. Speak", []string{"```sh", "/speak"}},
		{"4. Stream", []string{"```sh", "/stream\"", "timestamps"}},
		{"5. The WebSocket", []string{"task_start", "realtime.md", "/tokens"}},
		{"6. An OpenAI client", []string{"base_url", "/compat", "compat/audio/speech"}},
	}
	if len(hs) < len(steps)+1 {
		t.Fatalf("headings %q", hs)
	}
	for i, s := range steps {
		if hs[i] != s.heading {
			t.Fatalf("section %d is %q, want %q (headings %q)", i+1, hs[i], s.heading, hs)
		}
		start := strings.Index(doc, "## "+s.heading+"\n")
		end := strings.Index(doc[start+1:], "\n## ")
		section := doc[start : start+1+end]
		for _, w := range s.want {
			if !strings.Contains(section, w) {
				t.Errorf("section %q lacks %q", s.heading, w)
			}
		}
	}
	last := hs[len(hs)-1]
	if last != "About these pages" {
		t.Errorf("the last section is %q: the rendering notes belong at the end", last)
	}
	notes := doc[strings.Index(doc, "## About these pages"):]
	for _, w := range []string{"goldmark", "docs/html.go", "/docs/"} {
		if !strings.Contains(notes, w) {
			t.Errorf("the rendering notes lack %q", w)
		}
	}
	if i := strings.Index(doc, "goldmark"); i < strings.Index(doc, "## About these pages") {
		t.Errorf("rendering notes before the last section (goldmark at offset %d)", i)
	}
}
