package docs

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

func TestAnchor(t *testing.T) {
	for _, c := range []struct{ heading, want string }{
		{"Error codes", "error-codes"},
		{"task_start", "task_start"},
		{"Create an access token", "create-an-access-token"},
		{"Access tokens endpoint", "access-tokens-endpoint"},
		{"Voice (object)", "voice-object"},
	} {
		if got := Anchor(c.heading); got != c.want {
			t.Errorf("Anchor(%q) = %q, want %q", c.heading, got, c.want)
		}
	}
}

var (
	idAttr = regexp.MustCompile(`<h[1-6] id="([^"]+)"`)
	href   = regexp.MustCompile(`href="([^"]*)"`)
)

// TestLinksResolve renders every page and checks every link between the
// documents: the page exists and, with a #fragment, has that heading.
func TestLinksResolve(t *testing.T) {
	ids := map[string]map[string]bool{}
	for _, p := range Pages {
		b, ok := HTML(p)
		if !ok {
			t.Fatalf("%s not rendered", p)
		}
		ids[p] = map[string]bool{}
		for _, m := range idAttr.FindAllSubmatch(b, -1) {
			ids[p][string(m[1])] = true
		}
	}
	checked := 0
	for _, p := range Pages {
		b, _ := HTML(p)
		for _, m := range href.FindAllSubmatch(b, -1) {
			link := string(m[1])
			if strings.Contains(link, "://") || link == "./" {
				continue
			}
			target, frag, _ := strings.Cut(link, "#")
			if target == "" {
				target = p
			}
			if target == "openapi.yaml" {
				continue
			}
			if ids[target] == nil {
				t.Errorf("%s links to %q: no such page", p, link)
				continue
			}
			if frag != "" && !ids[target][frag] {
				t.Errorf("%s links to %q: %s has no heading with that id", p, link, target)
			}
			checked++
		}
	}
	if checked < 50 {
		t.Errorf("only %d links checked; the pattern no longer finds them", checked)
	}
}

func TestPagesAreSelfContained(t *testing.T) {
	for _, p := range Pages {
		b, _ := HTML(p)
		for _, bad := range []string{"<script", "src=\"http", "href=\"http://127", "spec/", "interface.md", "decisions.md"} {
			if bytes.Contains(b, []byte(bad)) {
				t.Errorf("%s contains %q", p, bad)
			}
		}
	}
	if !bytes.HasPrefix(OpenAPI(), []byte("openapi: 3.1")) {
		t.Error("openapi.yaml is not OpenAPI 3.1")
	}
}
