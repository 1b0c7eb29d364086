package synth

import (
	"testing"

	"voicesvc/control"
)

func TestPrepare(t *testing.T) {
	langs := []string{"en", "hi", "pt-BR"}
	settings := &control.VoiceSettings{Speed: ptr(1.25), Pitch: ptr(-2.0), Volume: ptr(0.8), Style: ptr(0.3)}
	voice := func(status, lang string, s *control.VoiceSettings) *control.Voice {
		return &control.Voice{ID: "v1", Status: status, PrimaryLanguage: lang, Settings: s, Profile: []byte("p")}
	}
	base := Options{Text: "Hello.", SampleRate: 24000, NumStep: 32}

	tests := []struct {
		name     string
		v        *control.Voice
		o        Options
		code     string
		lang     string
		speed    float64
		expr     float64 // -1: nil
		numSteps int
	}{
		{"primary language", voice(control.VoiceReady, "hi", nil), base, "", "hi", 0, -1, 32},
		{"request language", voice(control.VoiceReady, "hi", nil), with(base, func(o *Options) { o.Language = "EN" }), "", "en", 0, -1, 32},
		{"region falls back", voice(control.VoiceReady, "en", nil), with(base, func(o *Options) { o.Language = "en-GB" }), "", "en", 0, -1, 32},
		{"region exact", voice(control.VoiceReady, "en", nil), with(base, func(o *Options) { o.Language = "pt-br" }), "", "pt-BR", 0, -1, 32},
		{"unsupported", voice(control.VoiceReady, "en", nil), with(base, func(o *Options) { o.Language = "fr" }), control.EInvalidLanguage, "", 0, -1, 0},
		{"region of unsupported", voice(control.VoiceReady, "en", nil), with(base, func(o *Options) { o.Language = "pt" }), control.EInvalidLanguage, "", 0, -1, 0},
		{"no language anywhere", voice(control.VoiceReady, "", nil), base, "", "en", 0, -1, 32},
		{"voice language unsupported", voice(control.VoiceReady, "de", nil), base, control.EInvalidLanguage, "", 0, -1, 0},
		{"settings are defaults", voice(control.VoiceReady, "en", settings), base, "", "en", 1.25, 0.3, 32},
		{"request overrides", voice(control.VoiceReady, "en", settings),
			with(base, func(o *Options) { o.Speed, o.Expressiveness, o.NumStep = ptr(0.5), ptr(0.9), 4 }), "", "en", 0.5, 0.9, 4},
		{"zero num_step is default", voice(control.VoiceReady, "en", nil), with(base, func(o *Options) { o.NumStep = 0 }), "", "en", 0, -1, 32},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := Prepare(tc.v, tc.o, langs)
			if tc.code != "" {
				if e := control.AsError(err); e.Code != tc.code {
					t.Fatalf("got %v, want %s", err, tc.code)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			p := req.Params
			if req.Language != tc.lang || p.Speed != tc.speed || p.NumStep != tc.numSteps ||
				req.Text != tc.o.Text || string(req.Profile) != "p" {
				t.Fatalf("request %+v", req)
			}
			if tc.expr < 0 && p.Expressiveness != nil || tc.expr >= 0 && (p.Expressiveness == nil || *p.Expressiveness != tc.expr) {
				t.Fatalf("expressiveness %v, want %v", p.Expressiveness, tc.expr)
			}
			if tc.v.Settings != nil && tc.o.Pitch == nil && (p.Pitch != -2 || p.Volume != 0.8) {
				t.Fatalf("pitch/volume %v/%v not taken from settings", p.Pitch, p.Volume)
			}
		})
	}
	// The engine gets a copy: changing it leaves the voice alone.
	req, _ := Prepare(voice(control.VoiceReady, "en", settings), base, langs)
	*req.Params.Expressiveness = 1
	if *settings.Style != 0.3 {
		t.Fatal("request aliases the voice's settings")
	}
}

func with(o Options, f func(*Options)) Options {
	f(&o)
	return o
}
