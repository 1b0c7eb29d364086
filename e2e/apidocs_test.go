package e2e

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"voicesvc/e2e/harness"
)

// The runnable examples of the documentation (docs/api.md#examples): every
// fenced block marked ```sh in docs/api.md, docs/README.md and
// docs/dialects.md (the dialects' HTTP routes) is run, as
// written, with bash -euo pipefail against a real server with the
// reference engine; it must exit 0. Each curl in it must pass
// --fail-with-body, so that an error answer fails the block. Coverage: every
// operation of docs/openapi.yaml must be called by some block, but the
// WebSocket (GET /stream), whose example is the transcript in realtime.md
// (TestRealtimeTranscript). Blocks marked otherwise (```console for
// `make run`, ```js, ```python) are not run.
//
// The blocks read the variables api.md lists; this test sets them: a fresh
// draft voice (MY_VOICE_ID) and a fresh key (KEY_ID) for each block, so
// that blocks do not depend on each other's order.

var adDocs = []string{"../docs/api.md", "../docs/README.md", "../docs/dialects.md"}

type adBlock struct {
	file string
	line int
	code string
}

// adBlocks extracts the ```sh blocks of a Markdown file.
func adBlocks(t *testing.T, file string) []adBlock {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []adBlock
	var cur *adBlock
	var fence string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trim := strings.TrimSpace(line)
		switch {
		case cur == nil && fence == "" && strings.HasPrefix(trim, "```"):
			fence = "```"
			if trim == "```sh" {
				cur = &adBlock{file: file, line: n}
			}
		case fence != "" && trim == fence:
			if cur != nil {
				out = append(out, *cur)
			}
			cur, fence = nil, ""
		case cur != nil:
			cur.code += line + "\n"
		}
	}
	return out
}

// adCurl is one curl command of a block: its method and URL path template
// (variables as "*", the query cut).
type adCurl struct {
	method, path string
	failBody     bool
	text         string
}

var adToken = regexp.MustCompile(`"[^"]*"|'[^']*'|\S+`)

// adURLVars are the variables that stand for whole URLs, with the path
// they name.
var adURLVars = map[string]string{"$PREVIEW_URL": "/media/*", "${PREVIEW_URL}": "/media/*"}

func adCurls(code string) []adCurl {
	code = strings.ReplaceAll(code, "\\\n", " ")
	var out []adCurl
	for _, line := range strings.Split(code, "\n") {
		for _, cmd := range strings.Split(line, "|") {
			toks := adToken.FindAllString(cmd, -1)
			at := -1
			for i, tk := range toks {
				if tk == "curl" || strings.HasSuffix(tk, "$(curl") {
					at = i
					break
				}
			}
			if at < 0 {
				continue
			}
			c := adCurl{method: "", text: strings.TrimSpace(cmd)}
			data := false
			for i := at + 1; i < len(toks); i++ {
				tk := strings.Trim(toks[i], `"'`)
				switch {
				case tk == "--fail-with-body":
					c.failBody = true
				case (tk == "-X" || tk == "--request") && i+1 < len(toks):
					c.method = strings.Trim(toks[i+1], `"'`)
					i++
				case tk == "-d" || strings.HasPrefix(tk, "--data") || tk == "-F" || tk == "--form" || tk == "--json":
					data = true
					i++
				case strings.HasPrefix(tk, "-"):
				default:
					if p, ok := adURLVars[tk]; ok {
						c.path = p
						continue
					}
					for _, root := range []string{"$VOICESVC_URL", "${VOICESVC_URL}", "$VOICESVC_BASE", "${VOICESVC_BASE}"} {
						if rest, ok := strings.CutPrefix(tk, root); ok {
							rest, _, _ = strings.Cut(rest, "?")
							segs := strings.Split(rest, "/")
							for j, s := range segs {
								if strings.HasPrefix(s, "$") {
									segs[j] = "*"
								}
							}
							c.path = strings.Join(segs, "/")
						}
					}
				}
			}
			if c.method == "" {
				c.method = "GET"
				if data {
					c.method = "POST"
				}
			}
			out = append(out, c)
		}
	}
	return out
}

// adOperations lists "METHOD /path/{x}" of docs/openapi.yaml.
func adOperations(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	pathRe := regexp.MustCompile(`^  (/\S*):\s*$`)
	opRe := regexp.MustCompile(`^    (get|put|post|patch|delete|head):`)
	var ops []string
	path := ""
	for _, line := range strings.Split(string(b), "\n") {
		if m := pathRe.FindStringSubmatch(line); m != nil {
			path = m[1]
		} else if m := opRe.FindStringSubmatch(line); m != nil && path != "" {
			ops = append(ops, strings.ToUpper(m[1])+" "+path)
		}
	}
	if len(ops) < 20 {
		t.Fatalf("read %d operations from openapi.yaml", len(ops))
	}
	return ops
}

// adMatches: path template p (with {x}) matches a curl's path (with *).
func adMatches(p, got string) bool {
	a, b := strings.Split(p, "/"), strings.Split(got, "/")
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if strings.HasPrefix(a[i], "{") && b[i] != "" {
			continue
		}
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestAPIExamples(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (scripts/deps.sh installs it)", tool)
		}
	}
	var blocks []adBlock
	for _, f := range adDocs {
		blocks = append(blocks, adBlocks(t, f)...)
	}
	if len(blocks) < 15 {
		t.Fatalf("%d sh blocks in %v", len(blocks), adDocs)
	}

	// Coverage and --fail-with-body, before anything runs.
	var curls []adCurl
	for _, b := range blocks {
		cs := adCurls(b.code)
		if len(cs) == 0 {
			t.Errorf("%s:%d: a sh block without curl", b.file, b.line)
		}
		for _, c := range cs {
			if !c.failBody {
				t.Errorf("%s:%d: curl without --fail-with-body: %s", b.file, b.line, c.text)
			}
			if c.path == "" {
				t.Errorf("%s:%d: curl to no $VOICESVC_URL or $VOICESVC_BASE URL: %s", b.file, b.line, c.text)
			}
		}
		curls = append(curls, cs...)
	}
	for _, op := range adOperations(t) {
		if op == "GET /stream" {
			continue // the WebSocket: docs/realtime.md#transcript
		}
		method, path, _ := strings.Cut(op, " ")
		found := false
		for _, c := range curls {
			if c.method == method && adMatches(path, c.path) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("openapi.yaml's %s has no example in %v", op, adDocs)
		}
	}
	if t.Failed() {
		return
	}

	// The server and what the examples read.
	srv := harness.Start(t, harness.Options{Args: refArgs(0)})
	e := newEnv(t, srv, "pro")
	clip := clClip(t, "en", 50, clTexts["en"], "wav")
	clip0 := clRead(t, clip)
	_, jobID := clStartClone(t, srv.API, e.key, "Docs clone", clip0)
	job := clWaitJob(t, srv.API, e.key, jobID, 60*time.Second)
	if job["status"] != "succeeded" {
		t.Fatalf("clone job: %v", job)
	}
	cloned := job["voice_id"].(string)
	preview, _ := clVoice(t, srv.API, e.key, cloned)["sample_audio_url"].(string)
	if preview == "" {
		t.Fatal("the cloned voice has no sample_audio_url")
	}
	session := dashboardCookie(t, srv, e.ws)
	sess := []string{"Cookie", session, "Origin", srv.URL}

	for _, b := range blocks {
		r := mustCall(t, "POST", srv.API+"/voices", map[string]any{"name": "Example", "consent": true}, keyHdr(e.key)...)
		if r.status != 201 {
			t.Fatalf("create a voice: %d %s", r.status, r.body)
		}
		myVoice := r.data(t)["voice"].(map[string]any)["id"].(string)
		r = mustCall(t, "POST", srv.API+"/keys", map[string]any{"name": "example", "scopes": []string{"tts"}}, sess...)
		if r.status != 201 {
			t.Fatalf("create a key: %d %s", r.status, r.body)
		}
		keyID := r.data(t)["id"].(string)

		dir := t.TempDir()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", b.code)
		cmd.Dir = dir
		cmd.Env = []string{
			"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "LANG=C.UTF-8",
			"VOICESVC_BASE=" + srv.URL, "VOICESVC_URL=" + srv.API, "VOICESVC_KEY=" + e.key,
			"VOICE_ID=" + e.voice, "MY_VOICE_ID=" + myVoice, "CLIP=" + clip, "JOB_ID=" + jobID,
			"PREVIEW_URL=" + preview, "VOICESVC_SESSION=" + session, "KEY_ID=" + keyID,
		}
		start := time.Now()
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Errorf("%s:%d: %v after %v\n--- block ---\n%s--- output ---\n%.2000s", b.file, b.line, err,
				time.Since(start).Round(time.Millisecond), b.code, out)
		}
	}
	t.Logf("%d examples ran, %d curl calls, every openapi.yaml operation but the WebSocket covered", len(blocks), len(curls))

	// docs/api.md#delete-a-voice: a deleted voice's preview is gone.
	if r := mustCall(t, "DELETE", srv.API+"/voices/"+cloned, nil, keyHdr(e.key)...); r.status != 200 {
		t.Fatalf("delete the cloned voice: %d %s", r.status, r.body)
	}
	if r := mustCall(t, "GET", preview, nil); r.status != 404 {
		t.Errorf("a deleted voice's preview answers %d, want 404 (api.md, Delete a voice)", r.status)
	}
}
