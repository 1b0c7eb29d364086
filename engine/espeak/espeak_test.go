package espeak

import (
	"context"
	"errors"
	"math"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"

	"voicesvc/engine"
)

func mustNew(t testing.TB) *Engine {
	t.Helper()
	e, err := New()
	if err != nil {
		t.Fatal(err)
	}
	return e
}

type result struct {
	samples   []float32
	words     []engine.WordEvent
	sentences int
}

func renderReq(t testing.TB, e engine.Engine, req engine.Request) result {
	t.Helper()
	var r result
	err := e.Synthesize(context.Background(), req, func(c engine.Chunk) error {
		r.samples = append(r.samples, c.Samples...)
		r.words = append(r.words, c.Words...)
		if c.Last {
			r.sentences++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func rms(x []float32) float64 {
	var s float64
	for _, v := range x {
		s += float64(v) * float64(v)
	}
	return math.Sqrt(s / float64(max(len(x), 1)))
}

// testSentences: one per catalog language.
var testSentences = map[string]string{
	"en": "The quick brown fox jumps over the lazy dog.",
	"hi": "मैं आज बाज़ार जा रहा हूँ।",
	"es": "Mañana vamos a la playa con mis amigos.",
	"fr": "Nous allons au marché demain matin.",
	"de": "Wir fahren morgen mit dem Zug nach Berlin.",
	"it": "Domani andiamo al mare con gli amici.",
	"pt": "Amanhã vamos à praia com os amigos.",
}

// TestCatalogVoicesSpeak: every catalog voice speaks a sentence in its
// language: not silence, and 0.2-1.0 s per word.
func TestCatalogVoicesSpeak(t *testing.T) {
	e := mustNew(t)
	cat := e.Catalog()
	alias := regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	seen, langs := map[string]bool{}, map[string]bool{}
	for _, v := range cat {
		t.Run(v.Alias, func(t *testing.T) {
			if !alias.MatchString(v.Alias) || seen[v.Alias] || v.Name == "" {
				t.Fatalf("bad or duplicate alias %q / name %q", v.Alias, v.Name)
			}
			seen[v.Alias] = true
			langs[v.Language] = true
			for _, k := range []string{"gender", "accent", "age", "use_case"} {
				if v.Labels[k] == "" {
					t.Errorf("label %s missing", k)
				}
			}
			text := testSentences[v.Language]
			r := renderReq(t, e, engine.Request{Text: text, Profile: v.Profile})
			words := len(strings.Fields(text))
			secs := float64(len(r.samples)) / float64(e.NativeRate())
			if perWord := secs / float64(words); perWord < 0.2 || perWord > 1.0 {
				t.Errorf("%.2f s for %d words", secs, words)
			}
			if l := rms(r.samples); l < 0.01 {
				t.Errorf("RMS %.4f: silence", l)
			}
		})
	}
	if len(cat) < 10 || len(langs) < 5 || !langs["en"] || !langs["hi"] {
		t.Errorf("catalog: %d voices over %v", len(cat), langs)
	}
}

func TestLanguages(t *testing.T) {
	e := mustNew(t)
	have := map[string]bool{}
	for _, l := range e.Languages() {
		have[l] = true
	}
	for _, l := range []string{"en", "en-US", "en-GB", "hi", "es", "fr", "de", "it", "pt", "pt-BR"} {
		if !have[l] {
			t.Errorf("language %s missing", l)
		}
	}
	tests := []struct {
		lang string
		err  error
	}{
		{"EN-us", nil}, {"en_GB", nil}, {"hi", nil}, {"en-AU", nil}, {"", nil},
		{"xx", engine.ErrInvalidInput}, {"klingon", engine.ErrInvalidInput},
	}
	for _, tc := range tests {
		err := e.Synthesize(context.Background(), engine.Request{Text: "Hello.", Language: tc.lang}, func(engine.Chunk) error { return nil })
		if !errors.Is(err, tc.err) {
			t.Errorf("language %q: %v, want %v", tc.lang, err, tc.err)
		}
	}
}

func TestInvalidInput(t *testing.T) {
	e := mustNew(t)
	for _, req := range []engine.Request{
		{Text: "  \n\t "},
		{Text: "Hi.", Profile: []byte("not json")},
		{Text: "Hi.", Profile: []byte(`{"version":99,"voice":"en"}`)},
		{Text: "Hi.", Profile: Profile{Voice: "en", Variant: "../../etc/passwd"}.Marshal()},
		{Text: "Hi.", Profile: Profile{Voice: "en", Variant: "nosuchvariant"}.Marshal()},
	} {
		err := e.Synthesize(context.Background(), req, func(engine.Chunk) error { return nil })
		if !errors.Is(err, engine.ErrInvalidInput) {
			t.Errorf("%q %s: %v, want ErrInvalidInput", req.Text, req.Profile, err)
		}
	}
}

// TestParams: each parameter changes what it should.
func TestParams(t *testing.T) {
	e := mustNew(t)
	text := "Parameters change how this sentence sounds."
	base := renderReq(t, e, engine.Request{Text: text, Language: "en-US"})
	one := 1.0
	tests := []struct {
		name  string
		p     engine.Params
		check func(r result) bool
	}{
		{"speed 2 is shorter", engine.Params{Speed: 2}, func(r result) bool { return len(r.samples) < len(base.samples)*7/10 }},
		{"speed 0.5 is longer", engine.Params{Speed: 0.5}, func(r result) bool { return len(r.samples) > len(base.samples)*14/10 }},
		{"volume 0.5 halves the level", engine.Params{Volume: 0.5}, func(r result) bool {
			return math.Abs(rms(r.samples)/rms(base.samples)-0.5) < 0.05
		}},
		{"pitch +6 changes the audio", engine.Params{Pitch: 6}, func(r result) bool { return !equal(r.samples, base.samples) }},
		{"expressiveness changes the audio", engine.Params{Expressiveness: &one}, func(r result) bool { return !equal(r.samples, base.samples) }},
		{"num_step and guidance are recorded only", engine.Params{NumStep: 32, GuidanceScale: 3}, func(r result) bool {
			return len(r.words) == len(base.words) && math.Abs(float64(len(r.samples)-len(base.samples))) < 0.05*float64(len(base.samples))
		}},
	}
	for _, tc := range tests {
		r := renderReq(t, e, engine.Request{Text: text, Language: "en-US", Params: tc.p})
		if !tc.check(r) {
			t.Errorf("%s: %d samples (base %d), rms %.3f (base %.3f)", tc.name, len(r.samples), len(base.samples), rms(r.samples), rms(base.samples))
		}
	}
}

func equal(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestWordEvents: events point at the words of the original text, in
// order, with increasing sample positions across sentences.
func TestWordEvents(t *testing.T) {
	e := mustNew(t)
	text := "  Hello, wonderful world. नमस्ते दुनिया! Bye now."
	r := renderReq(t, e, engine.Request{Text: text, Language: "en"})
	var got []string
	last := -1
	for i, w := range r.words {
		got = append(got, text[w.TextOffset:w.TextOffset+w.TextLength])
		if w.Index != i || w.Sample < last || w.Sample > len(r.samples) {
			t.Errorf("event %d: %+v (previous sample %d)", i, w, last)
		}
		last = w.Sample
	}
	want := "Hello wonderful world नमस्ते दुनिया Bye now"
	if strings.Join(got, " ") != want || r.sentences != 3 {
		t.Errorf("words %q, %d sentences; want %q, 3", got, r.sentences, want)
	}
}

// TestCancel: cancelling stops synthesis inside the sentence.
func TestCancel(t *testing.T) {
	e := mustNew(t)
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	err := e.Synthesize(ctx, engine.Request{Text: "One long first sentence with many words in it to render. A second one."}, func(c engine.Chunk) error {
		if c.Sentence != 0 {
			t.Errorf("chunk of sentence %d after cancel", c.Sentence)
		}
		if n++; n == 1 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || n != 1 {
		t.Fatalf("err %v after %d chunks", err, n)
	}
	// The engine is usable afterwards.
	renderReq(t, e, engine.Request{Text: "Still here."})
}

func TestProfiles(t *testing.T) {
	p := Profile{Voice: "en-US", Language: "en-US", Variant: "f1", PitchBase: 150, PitchTop: 220, FormantScale: 1.1, Breath: 0.5, Rate: 190, Gain: 0.8}
	q, err := ParseProfile(p.Marshal())
	p.Version = ProfileVersion
	if err != nil || q != p {
		t.Fatalf("round trip: %+v, %v", q, err)
	}
	e := mustNew(t)
	text := "Profiles shape the voice."
	plain := renderReq(t, e, engine.Request{Text: text, Language: "en-US"})
	shaped := renderReq(t, e, engine.Request{Text: text, Profile: p.Marshal()})
	if equal(plain.samples, shaped.samples) || rms(shaped.samples) < 0.01 {
		t.Error("profile did not change the audio")
	}
}

// concurrentRequests: 32 requests over every catalog voice and language,
// one to three sentences, with parameters, breath, roughness and flutter.
func concurrentRequests(e *Engine) []engine.Request {
	cat := e.Catalog()
	rough := Profile{Voice: "en-US", Language: "en-US", Roughness: 5, Flutter: 12, Breath: 0.3}.Marshal()
	reqs := make([]engine.Request, 32)
	for i := range reqs {
		v := cat[i%len(cat)]
		r := engine.Request{Text: testSentences[v.Language] + strings.Repeat(" Ok, 12 more.", i%3), Profile: v.Profile}
		if i%8 == 7 {
			r.Profile = rough
		}
		if i%4 == 1 {
			x := 0.8
			r.Params = engine.Params{Speed: 1.25, Pitch: float64(i % 5), Expressiveness: &x}
		}
		reqs[i] = r
	}
	return reqs
}

// TestConcurrent: 32 goroutines synthesizing at once through the pool,
// with the in-process worker and with two subprocess workers (also with
// their sample buffers recycled), each get
// audio and word events identical, bit for bit, to the request rendered
// alone, requests one after another in reverse order (and each again
// right after itself).
func TestConcurrent(t *testing.T) {
	e := mustNew(t)
	if err := e.Reproducible(); err != nil {
		t.Fatal(err)
	}
	reqs := concurrentRequests(e)
	want := make([]result, len(reqs))
	for i := len(reqs) - 1; i >= 0; i-- {
		want[i] = renderReq(t, e, reqs[i])
	}
	// Right after itself (same voice selected, same state left behind).
	for i := range reqs {
		renderReq(t, e, reqs[i])
		if again := renderReq(t, e, reqs[i]); !equal(again.samples, want[i].samples) {
			t.Errorf("request %d rendered twice in a row: %d samples then %d", i, len(want[i].samples), len(again.samples))
		}
	}
	pools := []struct {
		name string
		opts engine.PoolOptions
	}{
		{"in-process", engine.PoolOptions{Engine: e, Workers: 1}},
		{"subprocess", engine.PoolOptions{Engine: e, Workers: 2, NewWorker: subprocessWorker}},
		// renderReq copies what it keeps, as the server's consumers do.
		{"subprocess-recycled", engine.PoolOptions{Engine: e, Workers: 2, NewWorker: subprocessWorker, RecycleSamples: true}},
	}
	for _, pc := range pools {
		t.Run(pc.name, func(t *testing.T) {
			p, err := engine.NewPool(pc.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			got := make([]result, len(reqs))
			var wg sync.WaitGroup
			for i := range reqs {
				wg.Go(func() { got[i] = renderReq(t, p, reqs[i]) })
			}
			wg.Wait()
			for i := range reqs {
				g, w := got[i], want[i]
				if !equal(g.samples, w.samples) || !reflect.DeepEqual(g.words, w.words) || g.sentences != w.sentences {
					first := -1
					for k := range min(len(g.samples), len(w.samples)) {
						if g.samples[k] != w.samples[k] {
							first = k
							break
						}
					}
					t.Errorf("request %d: %d samples %d words %d sentences, alone %d %d %d; first differing sample %d", i,
						len(g.samples), len(g.words), g.sentences, len(w.samples), len(w.words), w.sentences, first)
				}
			}
		})
	}
}

// TestNoLeakBetweenRequests: espeak-ng embedded commands in one request's
// text ("\x01" "150A" volume, "80H" echo, ...) do not change the next.
func TestNoLeakBetweenRequests(t *testing.T) {
	e := mustNew(t)
	req := engine.Request{Text: "Hello there my friend.", Profile: e.Catalog()[3].Profile}
	want := renderReq(t, e, req)
	renderReq(t, e, engine.Request{Text: "Loud \x01150A echo \x0180H emphasis \x013F pitch \x0190P now.", Profile: req.Profile})
	if got := renderReq(t, e, req); !equal(got.samples, want.samples) {
		t.Error("a request's embedded commands changed the next request's audio")
	}
}
