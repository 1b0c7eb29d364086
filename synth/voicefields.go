package synth

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"unicode/utf8"

	"voicesvc/control"
	"voicesvc/langtag"
)

// The field rules of a voice (docs/api.md#voices), for every protocol that
// creates or edits one: POST /voices, PATCH /voices/{id} and the clone
// form. A protocol decodes its wire shape into VoiceFields; the rules,
// one per field, are here.

// VoiceFields are a voice's fields as a protocol decoded them; nil is
// absent. Settings stay raw JSON (null clears them) so that every error in
// them, type errors included, answers invalid_settings.
type VoiceFields struct {
	Name, Description, Language, Visibility *string
	Labels                                  *[]control.Label
	Settings                                json.RawMessage
	BaseVoiceID                             *string // create only
	Consent                                 *bool   // create only
}

// VoiceChange is validated VoiceFields: the update to apply (nil fields
// are left alone; Settings set to a nil *VoiceSettings clears them), and
// for a create the voice it remixes.
type VoiceChange struct {
	control.VoiceUpdate
	BaseVoiceID string
}

// Field limits of docs/api.md#voices, plus label bounds of our own.
const (
	maxNameChars        = 100
	maxDescriptionChars = 1000
	maxLabels           = 32
	maxLabelKeyChars    = 64
	maxLabelValueChars  = 256
	maxEmotionChars     = 32
	maxEngineParams     = 4 << 10
)

var errConsent = control.Errorf(control.EConsentRequired,
	"consent must be true: the caller is the speaker or holds their explicit permission")

// VoiceCreate validates the fields of a new voice: consent first (it is
// the rule clients most need to hear about), then every field.
func VoiceCreate(f *VoiceFields) (*VoiceChange, error) {
	if f.Consent == nil || !*f.Consent {
		return nil, errConsent
	}
	if f.Name == nil {
		return nil, control.Errorf(control.EInvalidRequest, "name is required")
	}
	c, err := VoiceUpdate(f)
	if err != nil {
		return nil, err
	}
	if f.BaseVoiceID != nil && *f.BaseVoiceID != "" {
		if !control.ValidID(*f.BaseVoiceID) {
			return nil, control.Errorf(control.EInvalidVoiceID, "base_voice_id: no such voice")
		}
		c.BaseVoiceID = *f.BaseVoiceID
	}
	return c, nil
}

// VoiceUpdate validates the fields of an edit; consent and base_voice_id
// are not updatable and are ignored.
func VoiceUpdate(f *VoiceFields) (*VoiceChange, error) {
	c := &VoiceChange{}
	if f.Name != nil {
		name := strings.TrimSpace(*f.Name)
		if name == "" || utf8.RuneCountInString(name) > maxNameChars || !control.DisplayText(name) {
			return nil, control.Errorf(control.EInvalidRequest, "name: 1-%d printable characters", maxNameChars)
		}
		c.Name = &name
	}
	if f.Description != nil {
		if utf8.RuneCountInString(*f.Description) > maxDescriptionChars || !utf8.ValidString(*f.Description) {
			return nil, control.Errorf(control.EInvalidRequest, "description: at most %d characters", maxDescriptionChars)
		}
		c.Description = f.Description
	}
	if f.Language != nil {
		tag, ok := langtag.Canonical(*f.Language)
		if !ok {
			return nil, control.Errorf(control.EInvalidLanguage, "primary_language: %q is not a BCP-47 language tag", *f.Language)
		}
		c.PrimaryLanguage = &tag
	}
	if f.Labels != nil {
		if err := validLabels(*f.Labels); err != nil {
			return nil, err
		}
		c.Labels = f.Labels
	}
	if len(f.Settings) > 0 {
		st, err := ParseSettings(f.Settings)
		if err != nil {
			return nil, err
		}
		c.Settings = &st
	}
	if f.Visibility != nil {
		switch *f.Visibility {
		case "private", "org":
		default:
			return nil, control.Errorf(control.EInvalidRequest, "visibility: private or org")
		}
		c.Visibility = f.Visibility
	}
	return c, nil
}

func validLabels(ls []control.Label) error {
	if len(ls) > maxLabels {
		return control.Errorf(control.EInvalidRequest, "labels: at most %d", maxLabels)
	}
	for _, l := range ls {
		if l.Key == "" || utf8.RuneCountInString(l.Key) > maxLabelKeyChars || !control.DisplayText(l.Key) ||
			utf8.RuneCountInString(l.Value) > maxLabelValueChars || !control.DisplayText(l.Value) {
			return control.Errorf(control.EInvalidRequest,
				"labels: each needs a key of 1-%d and a value of at most %d printable characters",
				maxLabelKeyChars, maxLabelValueChars)
		}
	}
	return nil
}

// settingsBody mirrors control.VoiceSettings with engine_params kept raw,
// so that its size can be checked before it is decoded.
type settingsBody struct {
	Stability       *float64        `json:"stability"`
	Similarity      *float64        `json:"similarity"`
	Style           *float64        `json:"style"`
	Speed           *float64        `json:"speed"`
	Pitch           *float64        `json:"pitch"`
	Volume          *float64        `json:"volume"`
	UseSpeakerBoost *bool           `json:"use_speaker_boost"`
	Emotion         *string         `json:"emotion"`
	EngineParams    json.RawMessage `json:"engine_params"`
}

// ParseSettings validates a voice's settings object against the ranges of
// docs/api.md; every failure is invalid_settings. null and an object with
// no field set mean "not configured" (nil).
func ParseSettings(raw json.RawMessage) (*control.VoiceSettings, error) {
	raw = bytes.TrimSpace(raw)
	if bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	bad := func(format string, args ...any) error {
		return control.Errorf(control.EInvalidSettings, "settings: "+format, args...)
	}
	if len(raw) == 0 || raw[0] != '{' {
		return nil, bad("must be an object")
	}
	var sb settingsBody
	if err := json.Unmarshal(raw, &sb); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return nil, bad("%s must be %s", te.Field, KindName(te.Type))
		}
		return nil, bad("must be an object")
	}
	for _, c := range []struct {
		name   string
		v      *float64
		lo, hi float64
	}{
		{"stability", sb.Stability, 0, 1}, {"similarity", sb.Similarity, 0, 1}, {"style", sb.Style, 0, 1},
		{"speed", sb.Speed, 0.25, 4}, {"pitch", sb.Pitch, -12, 12}, {"volume", sb.Volume, 0, 2},
	} {
		if c.v != nil && (*c.v < c.lo || *c.v > c.hi) {
			return nil, bad("%s must be between %g and %g", c.name, c.lo, c.hi)
		}
	}
	if sb.Emotion != nil && (utf8.RuneCountInString(*sb.Emotion) > maxEmotionChars || !control.DisplayText(*sb.Emotion)) {
		return nil, bad("emotion: at most %d characters", maxEmotionChars)
	}
	st := &control.VoiceSettings{
		Stability: sb.Stability, Similarity: sb.Similarity, Style: sb.Style, Speed: sb.Speed,
		Pitch: sb.Pitch, Volume: sb.Volume, UseSpeakerBoost: sb.UseSpeakerBoost, Emotion: sb.Emotion,
	}
	if ep := bytes.TrimSpace(sb.EngineParams); len(ep) > 0 && !bytes.Equal(ep, []byte("null")) {
		if len(ep) > maxEngineParams {
			return nil, bad("engine_params: at most %d bytes of JSON", maxEngineParams)
		}
		if ep[0] != '{' || json.Unmarshal(ep, &st.EngineParams) != nil {
			return nil, bad("engine_params must be an object")
		}
		if len(st.EngineParams) == 0 {
			st.EngineParams = nil
		}
	}
	if SettingsEmpty(st) {
		return nil, nil
	}
	return st, nil
}

// SettingsEmpty: no setting is configured (a voice shows no settings).
func SettingsEmpty(st *control.VoiceSettings) bool {
	return st.Stability == nil && st.Similarity == nil && st.Style == nil && st.Speed == nil &&
		st.Pitch == nil && st.Volume == nil && st.UseSpeakerBoost == nil && st.Emotion == nil &&
		len(st.EngineParams) == 0
}

// KindName names the JSON type a Go type decodes from, for the messages
// of type errors ("a number").
func KindName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Float64, reflect.Float32, reflect.Int, reflect.Int64, reflect.Int32,
		reflect.Uint, reflect.Uint64, reflect.Uint32:
		return "a number"
	case reflect.Bool:
		return "a boolean"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "an object"
}
