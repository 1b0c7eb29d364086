package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"voicesvc/e2e/harness"
)

// get sends GET path with the key and decodes the JSON answer.
func get(t *testing.T, url, key string) (int, http.Header, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("GET %s: %d %q is not JSON", url, resp.StatusCode, body)
	}
	return resp.StatusCode, resp.Header, m
}

// A new user's first steps: a workspace and key from the admin CLI, the
// catalog listed with them, and a revoked key refused within 2 seconds.
func TestFirstSteps(t *testing.T) {
	srv := harness.Start(t, harness.Options{Args: []string{"--engine", "reference"}})
	_, key := harness.Workspace(t, srv.DB, "pro")

	status, hdr, body := get(t, srv.API+"/voices?page_size=100", key)
	if status != 200 || body["error"] != false {
		t.Fatalf("list voices: %d %v", status, body)
	}
	if hdr.Get("X-Request-Id") == "" {
		t.Error("no X-Request-Id on the list response")
	}
	voices := body["data"].(map[string]any)["voices"].([]any)
	if len(voices) == 0 {
		t.Fatal("no catalog voices listed")
	}
	for _, v := range voices {
		v := v.(map[string]any)
		if v["visibility"] != "public" || v["status"] != "ready" || v["alias"] == "" {
			t.Errorf("catalog voice %v: want public, ready, with an alias", v)
		}
	}

	for _, path := range []string{"/healthz", "/readyz"} {
		if status, hdr, _ := get(t, srv.URL+path, ""); status != 200 || hdr.Get("X-Request-Id") == "" {
			t.Errorf("%s: %d, X-Request-Id %q", path, status, hdr.Get("X-Request-Id"))
		}
	}
}

func TestRevokedKeyRefusedWithinTwoSeconds(t *testing.T) {
	srv := harness.Start(t, harness.Options{Args: []string{"--engine", "reference"}})
	ws := harness.Admin(t, srv.DB, "workspace", "create", "--name", "revoke")
	k := harness.Admin(t, srv.DB, "key", "create", "--workspace", ws["id"].(string))
	key := k["key"].(string)
	if status, _, _ := get(t, srv.API+"/voices", key); status != 200 {
		t.Fatalf("fresh key: %d", status)
	}
	harness.Admin(t, srv.DB, "key", "revoke", "--id", k["id"].(string))
	revoked := time.Now()
	for {
		status, _, body := get(t, srv.API+"/voices", key)
		if status == 401 {
			if _, has := body["code"]; has {
				t.Errorf("revoked key: 401 must carry no code, got %v", body)
			}
			break
		}
		if time.Since(revoked) > 2*time.Second {
			t.Fatalf("revoked key still answered %d after 2 s", status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The admin CLI's contract: one JSON object on stdout, errors on stderr with
// a non-zero exit.
func TestAdminCLI(t *testing.T) {
	db := "sqlite://" + filepath.Join(t.TempDir(), "admin.db")
	ws := harness.Admin(t, db, "workspace", "create", "--name", "acme")
	if ws["plan"] != "free" || len(ws["id"].(string)) != 24 {
		t.Errorf("workspace create: %v", ws)
	}
	up := harness.Admin(t, db, "workspace", "update", "--id", ws["id"].(string), "--plan", "starter",
		"--credits", "500", "--used", "70", "--rps", "0", "--concurrency", "7")
	if up["plan"] != "starter" || up["credits"] != 500.0 || up["used"] != 70.0 || up["concurrency"] != 7.0 || up["rps"] != 0.0 {
		t.Errorf("workspace update: %v", up)
	}
	k := harness.Admin(t, db, "key", "create", "--workspace", ws["id"].(string), "--scopes", "tts", "--expires-in", "2h")
	if !strings.HasPrefix(k["key"].(string), "vsk_") || len(k["key"].(string)) != 44 {
		t.Errorf("key: %v", k["key"])
	}
	if k["expires_at"] == nil {
		t.Error("key created with --expires-in has no expires_at")
	}
	legacy := harness.Admin(t, db, "key", "create", "--workspace", ws["id"].(string), "--legacy")
	if legacy["expires_at"] != nil || len(legacy["scopes"].([]any)) != 4 {
		t.Errorf("legacy key: %v", legacy)
	}
	r := harness.Admin(t, db, "key", "revoke", "--id", k["id"].(string))
	if r["revoked_at"] == nil {
		t.Errorf("revoke: %v", r)
	}

	for _, args := range [][]string{
		{"workspace", "create"},                                     // no --name
		{"workspace", "create", "--name", "x", "--plan", "gold"},    // unknown plan
		{"workspace", "update", "--id", "000000000000000000000000"}, // unknown workspace
		{"key", "create", "--workspace", ws["id"].(string), "--scopes", "everything"},
		{"key", "revoke", "--id", "000000000000000000000000"},
		{"nothing", "here"},
	} {
		cmd := exec.Command(harness.Binary(t), append(append([]string{"admin"}, args...), "--db", db)...)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if err == nil || stdout.Len() != 0 || stderr.Len() == 0 {
			t.Errorf("admin %v: err %v, stdout %q, stderr %q; want a failure on stderr only", args, err, stdout.String(), stderr.String())
		}
	}
}

// A bad setting stops the server at start, from a flag or the environment.
func TestServeRejectsBadConfig(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  []string
	}{
		{args: []string{"--billing", "sometimes"}},
		{args: []string{"--engine", "neural"}},
		{env: []string{"VOICESVC_ENGINE_WORKERS=lots"}},
		{args: []string{"--db", "mysql://x"}},
		{args: []string{"--log-level", "loud"}},
		{env: []string{"VOICESVC_LOG_LEVEL=verbose"}},
		{args: []string{"--log-format", "xml"}},
	} {
		cmd := exec.Command(harness.Binary(t), append([]string{"serve", "--addr", "127.0.0.1:0"}, c.args...)...)
		cmd.Env = append(cmd.Environ(), c.env...)
		cmd.Dir = t.TempDir()
		done := make(chan error, 1)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("serve %v %v exited 0", c.args, c.env)
			}
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			t.Errorf("serve %v %v kept running", c.args, c.env)
		}
	}
}

// TestFlagTableMatchesHelp: every flag `serve --help` lists is in the
// README's configuration table with the same environment variable and
// default, and the table lists no flag the binary lacks.
func TestFlagTableMatchesHelp(t *testing.T) {
	out, _ := exec.Command(harness.Binary(t), "serve", "--help").CombinedOutput()
	help := map[string]string{} // flag -> env
	flagLine := regexp.MustCompile(`^\s+-([a-z-]+)`)
	envName := regexp.MustCompile(`env (VOICESVC_[A-Z_]+)`)
	var last string
	for _, line := range strings.Split(string(out), "\n") {
		if m := flagLine.FindStringSubmatch(line); m != nil {
			last = m[1]
			help[last] = ""
		}
		if m := envName.FindStringSubmatch(line); m != nil && last != "" {
			help[last] = m[1]
		}
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	table := map[string]string{}
	row := regexp.MustCompile("(?m)^\\| `--([a-z-]+)` \\| `(VOICESVC_[A-Z_]+)` \\|")
	for _, m := range row.FindAllStringSubmatch(string(readme), -1) {
		table[m[1]] = m[2]
	}
	if len(help) < 10 {
		t.Fatalf("could not read the flags of serve --help:\n%s", out)
	}
	for f, env := range help {
		if env == "" {
			t.Errorf("--%s: --help names no environment variable", f)
		}
		if table[f] != env {
			t.Errorf("--%s: --help says %q, README's table %q", f, env, table[f])
		}
	}
	for f := range table {
		if _, ok := help[f]; !ok {
			t.Errorf("README lists --%s, which serve does not take", f)
		}
	}
}

// TestJSONLogs: with --log-format json every log line is one JSON object.
func TestJSONLogs(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(harness.Binary(t), "serve", "--addr", "127.0.0.1:0", "--log-format", "json",
		"--engine", "reference", "--engine-workers", "0", "--db", "sqlite://"+filepath.Join(dir, "v.db"),
		"--media-dir", filepath.Join(dir, "media"))
	cmd.Dir = dir
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatal("the server exited before logging")
			}
			if strings.HasPrefix(line, "voicesvc listening on ") {
				continue // the one plain line scripts read the address from
			}
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil || rec["level"] == nil || rec["msg"] == nil {
				t.Fatalf("not a JSON log record: %s (%v)", line, err)
			}
			if rec["msg"] == "serving" {
				return
			}
		case <-deadline:
			t.Fatal("no serving line within 20 s")
		}
	}
}
