package upstream

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"voicesvc/engine"
)

func TestDiscover(t *testing.T) {
	tests := []struct {
		name   string
		answer string
		want   []string // alias, name, language, profile of each discovered voice
	}{
		{"kokoro", `{"voices":[{"id":"af_bella","name":"af_bella"},{"id":"bm_george","name":"bm_george"},{"id":"en-us-linda","name":"configured already"}]}`,
			[]string{"up1-af-bella|af_bella (up1)|en-US|af_bella|female", "up1-bm-george|bm_george (up1)|en-GB|bm_george|male"}},
		{"kokoro legacy", `{"voices":["zf_xiaobei","ff_siwis"]}`,
			[]string{"up1-zf-xiaobei|zf_xiaobei (up1)|zh|zf_xiaobei|female", "up1-ff-siwis|ff_siwis (up1)|fr|ff_siwis|female"}},
		{"voicesvc", `{"voices":[{"id":"en-us-m1","name":"English (US) Male","language":"en-US"},{"id":"hi-f1","name":"Hindi Female","language":"hi"},{"id":"linda","name":"Alias clash"},{"id":"x","name":"No language"},{"id":"__","name":"No alias"}]}`,
			[]string{"up1-en-us-m1|English (US) Male (up1)|en-US|en-us-m1|", "up1-hi-f1|Hindi Female (up1)|hi|hi-f1|", "up1-x|No language (up1)|en|x|"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.setVoices(tc.answer)
			down := newFixture(t) // the first replica is down: the next one is asked
			down.srv.Close()
			e := newEngine(t, []string{down.srv.URL, f.srv.URL}, func(c *Config) { c.Discover = true })
			n, err := e.Discover(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, v := range e.Catalog()[1:] {
				got = append(got, fmt.Sprintf("%s|%s|%s|%s|%s", v.Alias, v.Name, v.Language, v.Profile, v.Labels["gender"]))
			}
			if n != len(tc.want) || !slices.Equal(got, tc.want) {
				t.Errorf("discovered %d:\n%q\nwant\n%q", n, got, tc.want)
			}
			if tc.name == "kokoro" && !slices.Equal(e.Languages(), []string{"en", "en-GB", "en-US"}) {
				t.Errorf("Languages %v", e.Languages())
			}
			if e.Catalog()[0].Alias != "up1-linda" {
				t.Error("the configured voice comes first")
			}
			// A discovered voice speaks through its profile (on the second
			// replica, after the first refused).
			cat := e.Catalog()
			voice := cat[len(cat)-1].Profile
			err = e.Synthesize(context.Background(), engine.Request{Text: "Discovered.", Profile: voice}, func(engine.Chunk) error { return nil })
			if reqs := f.requests(); err != nil || len(reqs) != 1 || reqs[0].Voice != string(voice) {
				t.Fatalf("err %v, requests %+v", err, reqs)
			}
		})
	}
}

func TestDiscoverOffAndFailing(t *testing.T) {
	f := newFixture(t)
	f.setVoices(`{"voices":["af_bella"]}`)
	e := newEngine(t, []string{f.srv.URL}, nil)
	if n, err := e.Discover(context.Background()); n != 0 || err != nil || len(e.Catalog()) != 1 {
		t.Errorf("discover off: %d, %v", n, err)
	}
	f.setVoices(`{"voices":`) // broken
	e = newEngine(t, []string{f.srv.URL}, func(c *Config) { c.Discover = true })
	if _, err := e.Discover(context.Background()); err == nil {
		t.Error("a broken list was accepted")
	}
	if langs := e.Languages(); !slices.Equal(langs, []string{"en"}) {
		t.Errorf("Languages %v", langs)
	}
}

func TestAliasOf(t *testing.T) {
	for voice, want := range map[string]string{"af_bella": "up1-af-bella", "Linda V2": "up1-linda-v2", "__x__": "up1-x", "é": ""} {
		if got := aliasOf("up1", voice); got != want {
			t.Errorf("%q: %q, want %q", voice, got, want)
		}
	}
}
