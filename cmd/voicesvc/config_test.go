package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "voicesvc.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const goodConfig = `addr: 127.0.0.1:9999
billing: meter
engine_workers: 3
ws-idle-timeout: 30s
engines:
  - name: up1
    type: openai
    urls: [http://127.0.0.1:9001/v1/]
    api_key: k1
    model: tts-1
    timeout: 2s
    sentence_timeout: 30s
    max_audio_seconds_per_char: 0.5
    max_sentence_bytes: 4194304
    voices:
      - {alias: up1-linda, voice: linda, language: en-US, labels: {gender: female}}
`

// Flags beat the environment, which beats the file, which beats the
// defaults; the engines come from the file.
func TestConfigFilePrecedence(t *testing.T) {
	path := writeConfig(t, goodConfig)
	t.Setenv("VOICESVC_BILLING", "off")
	for _, v := range []string{"VOICESVC_ADDR", "VOICESVC_ENGINE_WORKERS", "VOICESVC_WS_IDLE_TIMEOUT", "VOICESVC_CONFIG"} {
		os.Unsetenv(v)
	}
	c, err := parseServeConfig([]string{"--config", path, "--engine-workers", "5"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != "127.0.0.1:9999" || c.Billing != "off" || c.Workers != 5 || c.IdleTimeout != 30*time.Second ||
		c.QueueDepth != 4096 {
		t.Fatalf("precedence: %+v", c)
	}
	if len(c.Engines) != 1 {
		t.Fatalf("engines: %+v", c.Engines)
	}
	e := c.Engines[0]
	if e.Name != "up1" || e.URLs[0] != "http://127.0.0.1:9001/v1" || e.Timeout != 2*time.Second ||
		e.MaxConcurrency != 8 || e.SampleRate != 24000 || e.Voices[0].Labels["gender"] != "female" ||
		e.SentenceTimeout != 30*time.Second || e.MaxAudioSecondsPerChar != 0.5 || e.MaxSentenceBytes != 4<<20 {
		t.Fatalf("engine: %+v", e)
	}
}

// A bad file stops the server with the file's line and the reason.
func TestConfigFileErrors(t *testing.T) {
	os.Unsetenv("VOICESVC_CONFIG")
	cases := []struct{ name, body, want string }{
		{"syntax", "addr: [\n", "line"},
		{"unknown setting", "addr: x\nbogus: 1\n", ":2: unknown setting \"bogus\""},
		{"bad value", "\nengine_workers: many\n", ":2: engine_workers: "},
		{"twice", "addr: a\naddr: b\n", ":2: addr is set twice"},
		{"not a scalar", "addr: [a, b]\n", ":1: addr: want a single value"},
		{"engines not a list", "engines: {}\n", ":1: engines: want a list"},
		{"engine unknown key", "engines:\n  - name: up1\n    urll: x\n", ":3: engine: unknown key \"urll\""},
		{"voice unknown key", "engines:\n  - name: up1\n    voices:\n      - {alias: a, voise: b}\n", ":4: voice: unknown key \"voise\""},
		{"engine invalid", "engines:\n  - name: up1\n    type: openai\n    urls: [ftp://x]\n    model: m\n", ":2: upstream engine up1: urls[0]"},
		{"engine reserved name", "engines:\n  - {name: espeak, type: openai, urls: [http://x], model: m}\n", ":2: engine name \"espeak\""},
		{"engine twice", "engines:\n  - {name: a, type: openai, urls: [http://x], model: m}\n  - {name: a, type: openai, urls: [http://y], model: m}\n", ":3: engine name \"a\" is used twice"},
		{"engine bad sentence_timeout", "engines:\n  - {name: a, type: openai, urls: [http://x], model: m, sentence_timeout: -1s}\n", ":2: upstream engine a: sentence_timeout must not be negative"},
		{"engine bad max_sentence_bytes", "engines:\n  - {name: a, type: openai, urls: [http://x], model: m, max_sentence_bytes: lots}\n", ":2: "},
		{"engine bad type", "engines:\n  - {name: a, type: openai, urls: [http://x], model: m, max_concurrency: lots}\n", ":2: "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := writeConfig(t, c.body)
			_, err := parseServeConfig([]string{"--config", path}, io.Discard)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("got %v, want %q with the path", err, c.want)
			}
		})
	}
	if _, err := parseServeConfig([]string{"--config", "/nonexistent/voicesvc.yaml"}, io.Discard); err == nil {
		t.Fatal("a missing file must stop the server")
	}
}

// --engine-max-lag: 100 ms by default, 0 turns graceful overload off, and
// a negative value or one beyond the 250 ms head start a continuation has
// stops the server at start; the environment sets it too.
func TestEngineMaxLag(t *testing.T) {
	for _, v := range []string{"VOICESVC_ENGINE_MAX_LAG", "VOICESVC_CONFIG"} {
		os.Unsetenv(v)
	}
	tests := []struct {
		args []string
		env  string
		want time.Duration
		ok   bool
	}{
		{nil, "", 100 * time.Millisecond, true},
		{[]string{"--engine-max-lag", "0"}, "", 0, true},
		{[]string{"--engine-max-lag", "250ms"}, "", 250 * time.Millisecond, true},
		{nil, "40ms", 40 * time.Millisecond, true},
		{[]string{"--engine-max-lag", "-1ms"}, "", 0, false},
		{[]string{"--engine-max-lag", "1s"}, "", 0, false},
		{nil, "lots", 0, false},
	}
	for _, tc := range tests {
		if tc.env != "" {
			t.Setenv("VOICESVC_ENGINE_MAX_LAG", tc.env)
		} else {
			os.Unsetenv("VOICESVC_ENGINE_MAX_LAG")
		}
		c, err := parseServeConfig(tc.args, io.Discard)
		switch {
		case tc.ok && (err != nil || c.MaxLag != tc.want):
			t.Errorf("%v %q: %v %v, want %v", tc.args, tc.env, c.MaxLag, err, tc.want)
		case !tc.ok && err == nil:
			t.Errorf("%v %q: accepted (%v)", tc.args, tc.env, c.MaxLag)
		}
	}
}

// --store-timeout: flag, environment and file; 0, negatives and more than
// the gateway's own 10 s bound are refused at start.
func TestStoreTimeout(t *testing.T) {
	for _, v := range []string{"VOICESVC_STORE_TIMEOUT", "VOICESVC_CONFIG"} {
		os.Unsetenv(v)
	}
	file := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(file, []byte("store_timeout: 3s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args []string
		env  string
		want time.Duration
		ok   bool
	}{
		{nil, "", 5 * time.Second, true},
		{[]string{"--store-timeout", "2s"}, "", 2 * time.Second, true},
		{nil, "750ms", 750 * time.Millisecond, true},
		{[]string{"--store-timeout", "2s"}, "750ms", 2 * time.Second, true},
		{[]string{"--config", file}, "", 3 * time.Second, true},
		{[]string{"--config", file}, "1s", time.Second, true},
		{[]string{"--store-timeout", "0"}, "", 0, false},
		{[]string{"--store-timeout", "-1s"}, "", 0, false},
		{[]string{"--store-timeout", "11s"}, "", 0, false},
		{nil, "soon", 0, false},
	}
	for _, tc := range tests {
		if tc.env != "" {
			t.Setenv("VOICESVC_STORE_TIMEOUT", tc.env)
		} else {
			os.Unsetenv("VOICESVC_STORE_TIMEOUT")
		}
		c, err := parseServeConfig(tc.args, io.Discard)
		switch {
		case tc.ok && (err != nil || c.StoreTimeout != tc.want):
			t.Errorf("%v %q: %v %v, want %v", tc.args, tc.env, c.StoreTimeout, err, tc.want)
		case !tc.ok && err == nil:
			t.Errorf("%v %q: accepted (%v)", tc.args, tc.env, c.StoreTimeout)
		}
	}
}

// The lease flags (README, "Running several servers"): defaults, the
// environment, and the values refused at start.
func TestLeaseFlags(t *testing.T) {
	for _, v := range []string{"VOICESVC_LEASES", "VOICESVC_LEASE_TTL", "VOICESVC_LEASE_SYNC", "VOICESVC_CONFIG"} {
		os.Unsetenv(v)
	}
	c, err := parseServeConfig(nil, io.Discard)
	if err != nil || !c.Leases || c.Lease.TTL != 10*time.Second || c.Lease.Sync != 500*time.Millisecond ||
		c.Lease.SlotBatch != 64 || c.Lease.CharBatch != 20_000 || c.Lease.ExactBelow != 16 ||
		c.Lease.RPSBatch != 1000 || c.Lease.RPSFor != 200*time.Millisecond {
		t.Fatalf("defaults: %+v %v", c.Lease, err)
	}
	t.Setenv("VOICESVC_LEASES", "false")
	t.Setenv("VOICESVC_LEASE_TTL", "3s")
	if c, err := parseServeConfig(nil, io.Discard); err != nil || c.Leases || c.Lease.TTL != 3*time.Second {
		t.Fatalf("environment: leases %v ttl %v %v", c.Leases, c.Lease.TTL, err)
	}
	os.Unsetenv("VOICESVC_LEASES")
	os.Unsetenv("VOICESVC_LEASE_TTL")
	for _, bad := range [][]string{
		{"--lease-ttl", "50ms"},
		{"--lease-ttl", "3s", "--lease-sync", "2s"}, // more than a third of the TTL
		{"--lease-sync", "0"},
		{"--lease-slots", "0"},
		{"--lease-chars", "-1"},
		{"--lease-exact-below", "0"},
		{"--lease-idle", "0"},
		{"--lease-requests", "0"},
		{"--lease-requests-for", "5ms"},
		{"--lease-requests-for", "2s"},
	} {
		if _, err := parseServeConfig(bad, io.Discard); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
