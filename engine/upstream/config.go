package upstream

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"
	"unicode/utf8"
)

// Defaults of an upstream engine's configuration.
const (
	DefaultSampleRate     = 24000 // Kokoro-FastAPI, Speaches and voicesvc's compat all answer pcm at 24 kHz
	DefaultMaxConcurrency = 8
	DefaultTimeout        = 10 * time.Second
	DefaultEjectAfter     = 3
	DefaultEjectFor       = 5 * time.Second
	DefaultMaxWait        = 5 * time.Second
	// A sentence's answer may hold at most this much audio per character
	// of its text, at the engine's sample_rate (s16le mono): a generous
	// ceiling (speech runs at about 0.07 s a character, 0.3 s at speed
	// 0.25), which an upstream sending without end reaches within the
	// sentence's own size.
	DefaultMaxAudioSecondsPerChar = 1.0
	// DefaultMaxSentenceBytes caps a sentence's answer whatever its text:
	// 16 MiB, almost six minutes of 24 kHz audio.
	DefaultMaxSentenceBytes = 16 << 20
	// DefaultSentenceTimeout bounds the time a sentence waits for its
	// upstream, every attempt together: an upstream that drips its answer
	// holds a slot no longer.
	DefaultSentenceTimeout = 60 * time.Second
)

// Config describes one upstream engine: an OpenAI-compatible speech server
// (Kokoro-FastAPI, LocalAI, Speaches, another voicesvc's compat endpoint)
// with one or more replicas. The yaml tags are the keys of an entry of the
// configuration file's engines list.
type Config struct {
	Name string `yaml:"name"` // [a-z0-9-]{1,32}, unique among engines
	Type string `yaml:"type"` // "openai"
	// URLs are the replicas; a request goes to {url}/audio/speech.
	URLs []string `yaml:"urls"`
	// APIKey is sent as Authorization: Bearer. APIKeyEnv names an
	// environment variable to read it from instead (Validate does).
	APIKey    string `yaml:"api_key"`
	APIKeyEnv string `yaml:"api_key_env"`
	Model     string `yaml:"model"`
	// SampleRate is the rate of the upstream's pcm (s16le mono) output.
	SampleRate int `yaml:"sample_rate"`
	// MaxConcurrency caps the requests in flight per replica; more wait,
	// earliest deadline first.
	MaxConcurrency int `yaml:"max_concurrency"`
	// Timeout bounds the wait for the first audio byte of a sentence, and
	// any later stall of its stream.
	Timeout time.Duration `yaml:"timeout"`
	// SentenceTimeout bounds the time one sentence waits for the upstream
	// (connecting, its headers, its audio; every attempt together, the
	// time its listener holds the audio aside), however steadily audio
	// arrives; past it the sentence fails (502 upstream_error).
	SentenceTimeout time.Duration `yaml:"sentence_timeout"`
	// MaxAudioSecondsPerChar and MaxSentenceBytes bound what the upstream
	// may send for one sentence: the smaller of MaxAudioSecondsPerChar
	// seconds of audio (at SampleRate, s16le mono, divided by a speed below
	// 1) per character of its text, and MaxSentenceBytes. An answer
	// declaring more, or sending more, fails the sentence (502
	// upstream_error).
	MaxAudioSecondsPerChar float64 `yaml:"max_audio_seconds_per_char"`
	MaxSentenceBytes       int64   `yaml:"max_sentence_bytes"`
	// Discover: Discover also lists GET {url}/audio/voices and adds each
	// voice as alias "<name>-<voice>".
	Discover bool    `yaml:"discover"`
	Voices   []Voice `yaml:"voices"`

	// Tuning, not in the file: zero means the default.
	// EjectAfter consecutive connection failures or 5xx answers eject a
	// replica for EjectFor (3, 5 s).
	EjectAfter int           `yaml:"-"`
	EjectFor   time.Duration `yaml:"-"`
	// MaxWait bounds how long a request waits for a free slot before it
	// fails with ErrBusy (5 s); MaxWaiting bounds how many wait at once
	// (default 4 × the total slots).
	MaxWait    time.Duration `yaml:"-"`
	MaxWaiting int           `yaml:"-"`
}

// Voice is a catalog voice the upstream renders.
type Voice struct {
	Alias    string            `yaml:"alias"`    // catalog alias: [a-z0-9-], at most 64
	Voice    string            `yaml:"voice"`    // the upstream's voice name, sent as "voice"
	Name     string            `yaml:"name"`     // display name (default: the alias)
	Language string            `yaml:"language"` // BCP-47 tag
	Labels   map[string]string `yaml:"labels"`
}

// Validate checks c, fills in the defaults and resolves APIKeyEnv. The
// errors name the engine and the key at fault.
func (c *Config) Validate() error {
	if !validName(c.Name) {
		return fmt.Errorf("upstream engine %q: name must be 1-32 of a-z, 0-9 and -", c.Name)
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("upstream engine %s: "+format, append([]any{c.Name}, args...)...)
	}
	if c.Type != "openai" {
		return bad("type %q is not supported (want openai)", c.Type)
	}
	if len(c.URLs) == 0 {
		return bad("urls: at least one replica is needed")
	}
	seen := map[string]bool{}
	for i, u := range c.URLs {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" || p.RawQuery != "" || p.Fragment != "" {
			return bad("urls[%d]: want an http or https URL without query, got %q", i, redactURL(u))
		}
		u = strings.TrimRight(u, "/")
		if seen[u] {
			return bad("urls[%d]: %s is listed twice", i, redactURL(u))
		}
		seen[u] = true
		c.URLs[i] = u
	}
	if c.APIKeyEnv != "" {
		if c.APIKey != "" {
			return bad("api_key and api_key_env are exclusive")
		}
		c.APIKey = os.Getenv(c.APIKeyEnv)
		if c.APIKey == "" {
			return bad("api_key_env: %s is unset or empty", c.APIKeyEnv)
		}
	}
	if strings.ContainsAny(c.APIKey, "\r\n") {
		return bad("api_key: contains a line break")
	}
	if c.Model == "" {
		return bad("model is required")
	}
	if err := defaults(c); err != nil {
		return bad("%v", err)
	}
	aliases := map[string]bool{}
	for i, v := range c.Voices {
		if !validAlias(v.Alias) || aliases[v.Alias] {
			return bad("voices[%d]: alias %q is invalid (a-z, 0-9, -; at most 64) or repeated", i, v.Alias)
		}
		aliases[v.Alias] = true
		if v.Voice == "" {
			return bad("voices[%d] (%s): voice is required", i, v.Alias)
		}
		if !validLanguage(v.Language) {
			return bad("voices[%d] (%s): language %q is not a BCP-47 tag", i, v.Alias, v.Language)
		}
		if v.Name == "" {
			c.Voices[i].Name = v.Alias
		}
	}
	return nil
}

// defaults fills in zero tunables and rejects negative ones.
func defaults(c *Config) error {
	ints := []struct {
		key string
		v   *int
		def int
	}{
		{"sample_rate", &c.SampleRate, DefaultSampleRate},
		{"max_concurrency", &c.MaxConcurrency, DefaultMaxConcurrency},
		{"eject_after", &c.EjectAfter, DefaultEjectAfter},
		{"max_waiting", &c.MaxWaiting, 0},
	}
	for _, f := range ints {
		if *f.v < 0 {
			return fmt.Errorf("%s must not be negative", f.key)
		}
		if *f.v == 0 && f.def != 0 {
			*f.v = f.def
		}
	}
	if c.MaxWaiting == 0 {
		c.MaxWaiting = 4 * c.MaxConcurrency * len(c.URLs)
	}
	if c.SampleRate < 8000 || c.SampleRate > 192000 {
		return fmt.Errorf("sample_rate %d is outside 8000-192000", c.SampleRate)
	}
	durs := []struct {
		key string
		v   *time.Duration
		def time.Duration
	}{
		{"timeout", &c.Timeout, DefaultTimeout},
		{"eject_for", &c.EjectFor, DefaultEjectFor},
		{"max_wait", &c.MaxWait, DefaultMaxWait},
		{"sentence_timeout", &c.SentenceTimeout, DefaultSentenceTimeout},
	}
	for _, f := range durs {
		if *f.v < 0 {
			return fmt.Errorf("%s must not be negative", f.key)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	switch {
	case c.MaxAudioSecondsPerChar < 0 || c.MaxAudioSecondsPerChar != c.MaxAudioSecondsPerChar:
		return fmt.Errorf("max_audio_seconds_per_char must not be negative")
	case c.MaxAudioSecondsPerChar == 0:
		c.MaxAudioSecondsPerChar = DefaultMaxAudioSecondsPerChar
	case c.MaxAudioSecondsPerChar > 60:
		return fmt.Errorf("max_audio_seconds_per_char %g is above 60", c.MaxAudioSecondsPerChar)
	}
	switch {
	case c.MaxSentenceBytes < 0:
		return fmt.Errorf("max_sentence_bytes must not be negative")
	case c.MaxSentenceBytes == 0:
		c.MaxSentenceBytes = DefaultMaxSentenceBytes
	}
	return nil
}

// maxSentenceBytes is what the upstream may send for a sentence of text
// spoken at speed (0: the upstream's default): MaxAudioSecondsPerChar of
// audio per character, longer at a speed below 1, at most
// MaxSentenceBytes; at least one 20 ms chunk below that cap.
func (c *Config) maxSentenceBytes(text string, speed float64) int64 {
	secs := float64(utf8.RuneCountInString(text)) * c.MaxAudioSecondsPerChar
	if speed > 0 && speed < 1 {
		secs /= speed
	}
	n := max(secs*float64(c.SampleRate)*2, float64(c.SampleRate*2)*chunkDuration.Seconds())
	return min(int64(n), c.MaxSentenceBytes)
}

func validName(s string) bool { return len(s) <= 32 && validAlias(s) }

// validAlias: lowercase letters, digits and hyphens, as the catalog wants.
func validAlias(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// validLanguage accepts a well-formed BCP-47 tag: a 2-3 letter language,
// then subtags of 1-8 letters or digits.
func validLanguage(tag string) bool {
	if len(tag) < 2 || len(tag) > 35 {
		return false
	}
	for i, sub := range strings.Split(tag, "-") {
		if len(sub) == 0 || len(sub) > 8 || i == 0 && (len(sub) > 3 || len(sub) < 2) {
			return false
		}
		for j := 0; j < len(sub); j++ {
			c := sub[j] | 0x20
			letter := c >= 'a' && c <= 'z'
			if i == 0 && !letter || !letter && !(sub[j] >= '0' && sub[j] <= '9') {
				return false
			}
		}
	}
	return true
}

// redactURL hides a password in u, for errors and readyz.
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(unparsable URL)"
	}
	return p.Redacted()
}

var errNoVoice = errors.New("no upstream voice in the profile")
