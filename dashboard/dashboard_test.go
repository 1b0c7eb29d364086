package dashboard

import (
	"regexp"
	"strings"
	"testing"
)

// TestPagesRender: every page renders, and what it references is embedded.
func TestPagesRender(t *testing.T) {
	ws := &Workspace{ID: "0123456789abcdef01234567", Name: "<Acme & Co>", Plan: "pro", MonthlyChars: 1000000}
	pages := []*Page{{Name: "login", Title: "Sign in", Token: "vsl_x"}, {Name: "login", Title: "Sign in", Problem: "used"}}
	for _, p := range Pages {
		pages = append(pages, &Page{Name: p.Name, Title: p.Title, Script: p.Script, Workspace: ws, APIRoot: "/api"})
	}
	ref := regexp.MustCompile(`(?:src|href)="(/dashboard/static/[^"]+)"`)
	for _, p := range pages {
		b, err := Render(p)
		if err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		html := string(b)
		if p.Workspace != nil && (!strings.Contains(html, "&lt;Acme &amp; Co&gt;") || strings.Contains(html, "<Acme")) {
			t.Errorf("%s: workspace name not escaped", p.Name)
		}
		for _, m := range ref.FindAllStringSubmatch(html, -1) {
			if _, _, ok := Static(strings.TrimPrefix(m[1], "/dashboard/static/")); !ok {
				t.Errorf("%s: %s is not embedded", p.Name, m[1])
			}
		}
	}
	if _, err := Render(&Page{Name: "nope"}); err == nil {
		t.Error("unknown page rendered")
	}
}

// TestNoInlineCode: the CSP allows no inline script or style, so no template
// or script may rely on them (they would silently not run in a browser).
func TestNoInlineCode(t *testing.T) {
	bad := []*regexp.Regexp{
		regexp.MustCompile(`\sstyle=`),
		regexp.MustCompile(`<style`),
		regexp.MustCompile(`\son[a-z]+=`),
		regexp.MustCompile(`javascript:`),
	}
	files, _ := templateFS.ReadDir("templates")
	for _, f := range files {
		b, _ := templateFS.ReadFile("templates/" + f.Name())
		for _, re := range bad {
			if loc := re.FindIndex(b); loc != nil {
				t.Errorf("%s: inline code %q", f.Name(), b[loc[0]:loc[1]])
			}
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "<script") && !strings.Contains(line, " src=") {
				t.Errorf("%s: inline script %q", f.Name(), line)
			}
		}
	}
	scripts, _ := staticFS.ReadDir("static")
	for _, f := range scripts {
		if !strings.HasSuffix(f.Name(), ".js") {
			continue
		}
		b, _ := staticFS.ReadFile("static/" + f.Name())
		for _, s := range []string{"innerHTML", "eval(", "new Function", "setAttribute('style'", ".cssText"} {
			if strings.Contains(string(b), s) {
				t.Errorf("%s uses %s", f.Name(), s)
			}
		}
	}
}

func TestStatic(t *testing.T) {
	tests := []struct {
		name, ct string
		ok       bool
	}{
		{"app.js", "text/javascript", true},
		{"app.css", "text/css", true},
		{"favicon.svg", "image/svg+xml", true},
		{"pcm-worklet.js", "text/javascript", true},
		{"../dashboard.go", "", false},
		{"nope.js", "", false},
		{"", "", false},
		{"static", "", false},
	}
	for _, tt := range tests {
		_, ct, ok := Static(tt.name)
		if ok != tt.ok || !strings.HasPrefix(ct, tt.ct) {
			t.Errorf("Static(%q) = %q %v, want %q %v", tt.name, ct, ok, tt.ct, tt.ok)
		}
	}
}

func TestGroupDigits(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1000000: "1,000,000", -12345: "-12,345"} {
		if got := groupDigits(n); got != want {
			t.Errorf("groupDigits(%d) = %q, want %q", n, got, want)
		}
	}
}
