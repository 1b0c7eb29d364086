// Package dashboard holds the web pages of voicesvc: Go templates and the
// plain JavaScript and CSS they load, embedded in the binary so that the
// dashboard works with no network and fetches nothing from other hosts.
//
// The pages are thin: the server renders the frame and what it knows (the
// workspace and its plan); the scripts call the public API with the
// session cookie for everything that changes. No script or style is
// inline, so the Content-Security-Policy (CSP) needs no 'unsafe-inline'.
package dashboard

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"mime"
	"path"
	"strconv"
	"strings"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// CSP is the Content-Security-Policy of every dashboard response: only this
// origin's scripts, styles and connections (the WebSocket included), audio
// from this origin or from blobs the page made, and no framing.
const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self' ws: wss:; " +
	"media-src 'self' blob:; img-src 'self' data:; object-src 'none'; base-uri 'none'; " +
	"form-action 'self'; frame-ancestors 'none'"

// Page is what every template gets.
type Page struct {
	Name      string // template name: overview, voices, playground, keys, login
	Title     string
	APIRoot   string
	Workspace *Workspace // nil on the sign-in page
	Script    string     // the page's script under static/, "" for none
	// Login page only.
	Token   string // the link's secret, posted back by the sign-in button
	Problem string // why signing in failed, in words
}

// Workspace is what the pages show about the signed-in workspace.
type Workspace struct {
	ID, Name, Plan, Billing    string
	Concurrency, RPS, Sessions int
	MonthlyChars               int64
	Streaming                  bool
	SessionExpiresAt           string // RFC 3339, UTC
}

// Pages are the signed-in pages in navigation order.
var Pages = []struct{ Name, Path, Title, Script string }{
	{"overview", "/dashboard/", "Overview", "overview.js"},
	{"voices", "/dashboard/voices", "Voices", "voices.js"},
	{"playground", "/dashboard/playground", "Playground", "playground.js"},
	{"keys", "/dashboard/keys", "API keys", "keys.js"},
}

var templates = func() map[string]*template.Template {
	base := template.Must(template.New("layout.html").Funcs(template.FuncMap{
		"pages": func() any { return Pages },
		"num":   groupDigits,
	}).ParseFS(templateFS, "templates/layout.html"))
	out := map[string]*template.Template{}
	for _, name := range []string{"overview", "voices", "playground", "keys", "login"} {
		t := template.Must(base.Clone())
		out[name] = template.Must(t.ParseFS(templateFS, "templates/"+name+".html"))
	}
	return out
}()

// groupDigits writes n with thousands separators: 1,000,000.
func groupDigits(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// Render executes the page's template.
func Render(p *Page) ([]byte, error) {
	t, ok := templates[p.Name]
	if !ok {
		return nil, fmt.Errorf("dashboard: no page %q", p.Name)
	}
	var b bytes.Buffer
	if err := t.ExecuteTemplate(&b, "layout.html", p); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Static returns an embedded asset and its content type; ok is false when
// there is none by that name.
func Static(name string) (body []byte, contentType string, ok bool) {
	if !fs.ValidPath(name) || path.Ext(name) == "" {
		return nil, "", false
	}
	b, err := staticFS.ReadFile("static/" + name)
	if err != nil {
		return nil, "", false
	}
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = "application/octet-stream"
	}
	return b, ct, true
}
