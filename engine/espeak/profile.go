package espeak

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ProfileVersion is the format version Marshal writes and ParseProfile
// accepts.
const ProfileVersion = 1

// Profile is the espeak-ng voice profile: the bytes stored on a voice and
// passed back in engine.Request.Profile. Zero fields mean "the base
// voice's or the variant's own value". Catalog voices are profiles; the
// cloning analysis produces them from audio.
type Profile struct {
	Version  int    `json:"version"`
	Voice    string `json:"voice"`             // espeak-ng voice, e.g. "en-US", "hi"
	Language string `json:"language"`          // BCP-47 tag the voice speaks
	Variant  string `json:"variant,omitempty"` // stock variant (voices/!v) to start from

	PitchBase    float64 `json:"pitch_base,omitempty"`    // Hz, the low end of the pitch
	PitchTop     float64 `json:"pitch_top,omitempty"`     // Hz, the high end
	Range        int     `json:"range,omitempty"`         // espeakRANGE 0-100 (50 = normal)
	FormantScale float64 `json:"formant_scale,omitempty"` // multiplies formant frequencies
	Rate         int     `json:"rate,omitempty"`          // words per minute (175 = normal)
	Breath       float64 `json:"breath,omitempty"`        // 0-1 breathiness
	Flutter      int     `json:"flutter,omitempty"`       // pitch instability
	Roughness    int     `json:"roughness,omitempty"`     // 0-7 creak
	Gain         float64 `json:"gain,omitempty"`          // sample gain (1 = unchanged)
}

// Marshal serializes p with the current version.
func (p Profile) Marshal() []byte {
	p.Version = ProfileVersion
	b, err := json.Marshal(p)
	if err != nil {
		panic(err) // only plain fields: cannot fail
	}
	return b
}

// ParseProfile reads a profile made by Marshal and checks its ranges.
func ParseProfile(b []byte) (Profile, error) {
	var p Profile
	if err := json.Unmarshal(b, &p); err != nil {
		return Profile{}, fmt.Errorf("espeak profile: %w", err)
	}
	if p.Version != ProfileVersion {
		return Profile{}, fmt.Errorf("espeak profile: version %d, want %d", p.Version, ProfileVersion)
	}
	switch {
	case p.Voice == "" && p.Language == "":
		return Profile{}, fmt.Errorf("espeak profile: no voice or language")
	case !validName(p.Variant):
		return Profile{}, fmt.Errorf("espeak profile: bad variant %q", p.Variant)
	case p.PitchBase < 0 || p.PitchBase > 400 || p.PitchTop < 0 || p.PitchTop > 600:
		return Profile{}, fmt.Errorf("espeak profile: pitch out of range")
	case p.Range < 0 || p.Range > 100 || p.Rate < 0 || p.Rate > 600:
		return Profile{}, fmt.Errorf("espeak profile: range or rate out of range")
	case p.FormantScale < 0 || p.FormantScale > 2 || p.Breath < 0 || p.Breath > 1:
		return Profile{}, fmt.Errorf("espeak profile: formant scale or breath out of range")
	case p.Flutter < 0 || p.Flutter > 100 || p.Roughness < 0 || p.Roughness > 7 || p.Gain < 0 || p.Gain > 4:
		return Profile{}, fmt.Errorf("espeak profile: flutter, roughness or gain out of range")
	}
	return p, nil
}

// validName: a variant is a file name under voices/!v, never a path.
func validName(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == ' ') {
			return false
		}
	}
	return len(s) < 30
}

// espeak-ng's own defaults when a voice file sets no pitch or formant.
const (
	defaultPitchBase = 82
	defaultPitchTop  = 118
	numFormants      = 9
)

// variantFile returns the text of an espeak-ng variant file realizing p's
// tone settings shifted by semitones, starting from the stock variant's
// text. Later lines override earlier ones in espeak-ng's voice files, so
// the overrides are appended. Empty when there is nothing to change.
func variantFile(p Profile, stock string, semitones float64) string {
	base, top := float64(defaultPitchBase), float64(defaultPitchTop)
	formants := [numFormants][3]int{}
	for i := range formants {
		formants[i] = [3]int{100, 100, 100}
	}
	sc := bufio.NewScanner(strings.NewReader(stock))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 3 && f[0] == "pitch" {
			b, err1 := strconv.Atoi(f[1])
			t, err2 := strconv.Atoi(f[2])
			if err1 == nil && err2 == nil {
				base, top = float64(b), float64(t)
			}
		}
		if len(f) >= 5 && f[0] == "formant" {
			if n, err := strconv.Atoi(f[1]); err == nil && n >= 0 && n < numFormants {
				for k := range 3 {
					if v, err := strconv.Atoi(f[2+k]); err == nil {
						formants[n][k] = v
					}
				}
			}
		}
	}
	var b strings.Builder
	if p.PitchBase > 0 {
		base = p.PitchBase
	}
	if p.PitchTop > 0 {
		top = p.PitchTop
	}
	if p.PitchBase > 0 || p.PitchTop > 0 || semitones != 0 {
		f := math.Pow(2, semitones/12)
		fmt.Fprintf(&b, "pitch %d %d\n", int(math.Round(base*f)), int(math.Round(max(top, base)*f)))
	}
	if p.FormantScale > 0 && p.FormantScale != 1 {
		for i, fm := range formants {
			fmt.Fprintf(&b, "formant %d %d %d %d\n", i, int(math.Round(float64(fm[0])*p.FormantScale)), fm[1], fm[2])
		}
	}
	if p.Breath > 0 {
		// Breath noise per formant peak; the upper peaks carry most of it.
		s := func(v float64) int { return int(math.Round(v * p.Breath)) }
		fmt.Fprintf(&b, "breath 0 %d %d %d %d %d %d %d\n", s(4), s(8), s(8), s(8), s(8), s(6), s(6))
		b.WriteString("breathw 150 150 200 200 400 400\n")
	}
	fmt.Fprintf(&b, "flutter %d\n", p.Flutter)
	if p.Roughness > 0 {
		fmt.Fprintf(&b, "roughness %d\n", p.Roughness)
	}
	if b.Len() == 0 && strings.TrimSpace(stock) == "" {
		return ""
	}
	return "language variant\n" + stock + "\n# voicesvc profile\n" + b.String()
}

// variantName names a generated variant after its content, so equal
// settings share one file and different ones never collide.
func variantName(content string) string {
	h := sha256.Sum256([]byte(content))
	return "vs" + hex.EncodeToString(h[:6])
}
