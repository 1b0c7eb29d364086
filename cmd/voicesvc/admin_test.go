package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A new user's admin session, one command after another in a directory of
// their own: help, version, the list commands, and a store that is not
// where the command looks (a new SQLite file is made only by workspace
// create or --create, and every command says which store it opened).
func TestAdminCLI(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("VOICESVC_DB", "")
	db := "sqlite://" + filepath.Join(dir, "store", "voicesvc.db")
	vars := map[string]string{}
	type step struct {
		name      string
		args      []string
		code      int
		stdout    []string // substrings, after $VAR expansion
		notStdout []string
		stderr    []string
		save      map[string]string // var -> JSON path "a.b" or "a.0.b" read from stdout
		noFile    string            // a path that must still not exist afterwards
	}
	steps := []step{
		{name: "admin --help", args: []string{"admin", "--help"}, stdout: []string{"workspace list", "key list --workspace", "voice list --workspace", "--create"}},
		{name: "admin -h", args: []string{"admin", "-h"}, stdout: []string{"usage: voicesvc admin"}},
		{name: "admin help", args: []string{"admin", "help"}, stdout: []string{"usage: voicesvc admin"}},
		{name: "flags help", args: []string{"admin", "key", "create", "--help"}, stderr: []string{"-workspace"}},
		{name: "unknown", args: []string{"admin", "workspace", "delete"}, code: 2, stderr: []string{`unknown command "workspace delete"`, "workspace list"}},
		{name: "version", args: []string{"version"}, stdout: []string{"voicesvc ", "go1."}},
		{name: "--version", args: []string{"--version"}, stdout: []string{"voicesvc "}},
		// The default store, ./data/voicesvc.db, is not in this directory.
		{name: "default store missing", args: []string{"admin", "workspace", "list"}, code: 1,
			stderr: []string{"no store at " + filepath.Join(dir, "data", "voicesvc.db"), "--create"}, noFile: "data/voicesvc.db"},
		{name: "key create, store missing", args: []string{"admin", "key", "create", "--db", db, "--workspace", "0123456789abcdef01234567"}, code: 1,
			stderr: []string{"no store at"}, noFile: filepath.Join(dir, "store", "voicesvc.db")},
		{name: "workspace create", args: []string{"admin", "workspace", "create", "--db", db, "--name", "acme"},
			stdout: []string{`"name":"acme"`}, stderr: []string{"voicesvc admin: store " + db + " (new)"}, save: map[string]string{"WS": "id"}},
		{name: "workspace list", args: []string{"admin", "workspace", "list", "--db", db},
			stdout: []string{`"workspaces":[{"id":"$WS","name":"acme","plan":"free"`}, stderr: []string{"voicesvc admin: store " + db + "\n"}},
		{name: "key create", args: []string{"admin", "key", "create", "--db", db, "--workspace", "$WS", "--scopes", "tts"},
			save: map[string]string{"KEY": "id", "SECRET": "key"}},
		{name: "key list", args: []string{"admin", "key", "list", "--db", db, "--workspace", "$WS"},
			stdout: []string{`"keys":[{"id":"$KEY","scopes":["tts"],"expires_at":null,"revoked_at":null`}, notStdout: []string{"$SECRET", "hash"}},
		{name: "key list, no workspace flag", args: []string{"admin", "key", "list", "--db", db}, code: 1, stderr: []string{"--workspace is required"}},
		{name: "key list, unknown workspace", args: []string{"admin", "key", "list", "--db", db, "--workspace", "0123456789abcdef01234567"}, code: 1,
			stderr: []string{"workspace not found"}},
		{name: "voice list", args: []string{"admin", "voice", "list", "--db", db, "--workspace", "$WS"}, stdout: []string{`{"voices":[]}`}},
		{name: "create elsewhere with --create", args: []string{"admin", "workspace", "list", "--db", "sqlite://other.db", "--create"},
			stdout: []string{`{"workspaces":[]}`}, stderr: []string{"store sqlite://" + filepath.Join(dir, "other.db") + " (new)"}},
	}
	expand := func(s string) string {
		for k, v := range vars {
			s = strings.ReplaceAll(s, "$"+k, v)
		}
		return s
	}
	for _, st := range steps {
		args := make([]string, len(st.args))
		for i, a := range st.args {
			args[i] = expand(a)
		}
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr)
		if code != st.code {
			t.Fatalf("%s: exit %d, want %d\nstdout: %s\nstderr: %s", st.name, code, st.code, stdout.String(), stderr.String())
		}
		for _, w := range st.stdout {
			if w = expand(w); !strings.Contains(stdout.String(), w) {
				t.Errorf("%s: stdout lacks %q:\n%s", st.name, w, stdout.String())
			}
		}
		for _, w := range st.notStdout {
			if w = expand(w); strings.Contains(stdout.String(), w) {
				t.Errorf("%s: stdout has %q:\n%s", st.name, w, stdout.String())
			}
		}
		for _, w := range st.stderr {
			if w = expand(w); !strings.Contains(stderr.String(), w) {
				t.Errorf("%s: stderr lacks %q:\n%s", st.name, w, stderr.String())
			}
		}
		if st.noFile != "" {
			if _, err := os.Stat(st.noFile); err == nil {
				t.Errorf("%s: %s was created", st.name, st.noFile)
			}
		}
		if len(st.save) > 0 {
			var m map[string]any
			if err := json.Unmarshal(stdout.Bytes(), &m); err != nil {
				t.Fatalf("%s: %v: %s", st.name, err, stdout.String())
			}
			for k, field := range st.save {
				v, _ := m[field].(string)
				if v == "" {
					t.Fatalf("%s: no %s in %s", st.name, field, stdout.String())
				}
				vars[k] = v
			}
		}
	}
}

// A value the file sets that validation refuses is reported with the
// file's line, like any other mistake in the file; from the environment,
// with the variable.
func TestConfigFileBadValueLine(t *testing.T) {
	for _, v := range []string{"VOICESVC_BILLING", "VOICESVC_LOG_FORMAT", "VOICESVC_ENGINE", "VOICESVC_CONFIG"} {
		t.Setenv(v, "")
		os.Unsetenv(v)
	}
	for _, tc := range []struct {
		file string
		args []string
		env  map[string]string
		want string
	}{
		{file: "addr: 127.0.0.1:9999\n\nbilling: maybe\n", want: `voicesvc.yaml:3: billing "maybe": want off, meter or enforce`},
		{file: "log_format: xml\n", want: `voicesvc.yaml:1: log_format "xml": want text or json`},
		{file: "engine: espeak\nengine-queue: 0\n", want: `voicesvc.yaml:2: engine-queue 0: want at least 1`},
		{file: "billing: maybe\n", args: []string{"--billing", "never"}, want: `--billing "never": want off, meter or enforce`},
		{file: "billing: meter\n", env: map[string]string{"VOICESVC_BILLING": "sometimes"}, want: `VOICESVC_BILLING="sometimes": want off, meter or enforce`},
	} {
		for k, v := range tc.env {
			t.Setenv(k, v)
		}
		path := writeConfig(t, tc.file)
		_, err := parseServeConfig(append([]string{"--config", path}, tc.args...), &bytes.Buffer{})
		if err == nil || !strings.HasSuffix(err.Error(), tc.want) {
			t.Errorf("%q %v: %v, want ...%s", tc.file, tc.args, err, tc.want)
		}
		if strings.Contains(tc.want, "yaml:") && !strings.HasPrefix(err.Error(), path) {
			t.Errorf("%q: %v, want the file's path first", tc.file, err)
		}
		for k := range tc.env {
			os.Unsetenv(k)
		}
	}
}
