package docs

import (
	"bytes"
	"fmt"
	"html"
	"strings"
	"sync"
	"unicode"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
)

// Pages are the Markdown files served as HTML, in navigation order. The
// index (README.md) is served at /docs/.
var Pages = []string{"README.md", "api.md", "realtime.md", "dialects.md"}

var (
	renderOnce sync.Once
	rendered   map[string][]byte
	renderErr  error
)

// HTML returns the page name (one of Pages) as a standalone HTML document,
// rendered once per process (about 100 KB in all). Links between the
// documents stay relative (`realtime.md#close-codes`), so they work the
// same on a repository host and under /docs/ of a running server.
func HTML(name string) ([]byte, bool) {
	renderOnce.Do(func() { rendered, renderErr = renderAll() })
	if renderErr != nil {
		panic("docs: " + renderErr.Error()) // the embedded files are fixed at build time
	}
	b, ok := rendered[name]
	return b, ok
}

func renderAll() (map[string][]byte, error) {
	md := goldmark.New(
		goldmark.WithExtensions(extension.GFM), // tables, autolinks, strikethrough
		goldmark.WithParserOptions(parser.WithAutoHeadingID()),
	)
	out := make(map[string][]byte, len(Pages))
	for _, name := range Pages {
		src, err := files.ReadFile(name)
		if err != nil {
			return nil, err
		}
		var body bytes.Buffer
		ctx := parser.NewContext(parser.WithIDs(newAnchorIDs()))
		if err := md.Convert(src, &body, parser.WithContext(ctx)); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out[name] = page(name, title(src), body.Bytes())
	}
	return out, nil
}

// title is the text of the document's first line, a "# Title" heading.
func title(src []byte) string {
	line, _, _ := bytes.Cut(src, []byte("\n"))
	return strings.TrimSpace(strings.TrimLeft(string(line), "#"))
}

func page(name, title string, body []byte) []byte {
	var b bytes.Buffer
	b.WriteString("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n")
	b.WriteString("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")
	fmt.Fprintf(&b, "<title>%s</title>\n<style>%s</style>\n</head><body>\n<nav>", html.EscapeString(title), css)
	for _, p := range Pages {
		label, href := strings.TrimSuffix(p, ".md"), p
		if p == "README.md" {
			label, href = "docs", "./"
		}
		cls := ""
		if p == name {
			cls = ` class="here"`
		}
		fmt.Fprintf(&b, `<a href="%s"%s>%s</a> `, href, cls, label)
	}
	b.WriteString(`<a href="openapi.yaml">openapi.yaml</a></nav>` + "\n<main>\n")
	b.Write(body)
	b.WriteString("</main></body></html>\n")
	return b.Bytes()
}

// A small stylesheet of our own: readable tables and code, no script.
const css = `body{margin:0;font:16px/1.5 system-ui,sans-serif;color:#1f2328;background:#fff}
nav{position:sticky;top:0;background:#f6f8fa;border-bottom:1px solid #d0d7de;padding:.5em 1em}
nav a{margin-right:1em;text-decoration:none}nav a.here{font-weight:600}
main{max-width:60em;margin:0 auto;padding:1em 1.5em 4em}
h1,h2,h3{line-height:1.25}h2{border-bottom:1px solid #d0d7de;padding-bottom:.3em;margin-top:2em}
code,pre{font:13px/1.45 ui-monospace,monospace;background:#f6f8fa;border-radius:4px}
code{padding:.1em .3em}pre{padding:.8em 1em;overflow:auto}pre code{padding:0}
table{border-collapse:collapse;display:block;overflow:auto;margin:1em 0}
th,td{border:1px solid #d0d7de;padding:.3em .6em;vertical-align:top;text-align:left}
tr:nth-child(2n){background:#f6f8fa}a{color:#0969da}`

// anchorIDs makes heading ids the way the repository host does, so that
// a link such as api.md#error-codes or realtime.md#task_start works in
// both places: lower case, letters, digits, '-' and '_' kept, spaces
// become '-', anything else dropped; a repeated id gets -1, -2, ...
// (goldmark's own generator turns '_' into '-').
type anchorIDs struct{ seen map[string]bool }

func newAnchorIDs() *anchorIDs { return &anchorIDs{seen: map[string]bool{}} }

var _ parser.IDs = (*anchorIDs)(nil)

func (a *anchorIDs) Generate(value []byte, _ ast.NodeKind) []byte {
	id := Anchor(string(value))
	if id == "" {
		id = "section"
	}
	base := id
	for i := 1; a.seen[id]; i++ {
		id = fmt.Sprintf("%s-%d", base, i)
	}
	a.seen[id] = true
	return []byte(id)
}

func (a *anchorIDs) Put(value []byte) { a.seen[string(value)] = true }

// Anchor is the id of a heading with the given text.
func Anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.TrimSpace(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}
