package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"unicode/utf8"

	"voicesvc/control"
	"voicesvc/langtag"
)

// voiceBody is the JSON of POST /voices and PATCH /voices/{id}. Pointers
// tell "absent" from "empty"; settings stays raw so that its errors, type
// errors included, answer invalid_settings.
type voiceBody struct {
	Name            *string          `json:"name"`
	Description     *string          `json:"description"`
	PrimaryLanguage *string          `json:"primary_language"`
	Labels          *[]control.Label `json:"labels"`
	Settings        json.RawMessage  `json:"settings"`
	Visibility      *string          `json:"visibility"`
	BaseVoiceID     *string          `json:"base_voice_id"` // create only
	Consent         *bool            `json:"consent"`       // create only
}

var voiceFieldCodes = fieldCodes{
	"settings":         control.EInvalidSettings,
	"consent":          control.EConsentRequired,
	"primary_language": control.EInvalidLanguage,
	"base_voice_id":    control.EInvalidVoiceID,
}

// voiceInput is a validated voiceBody. For PATCH, nil fields are left
// alone; settings set to a nil *VoiceSettings clears them.
type voiceInput struct {
	name, description, language, visibility *string
	labels                                  *[]control.Label
	settings                                **control.VoiceSettings
	baseVoiceID                             string
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

// parseVoiceCreate validates a POST /voices body: consent first (it is the
// rule clients most need to hear about), then every field.
func parseVoiceCreate(body []byte, max int) (*voiceInput, error) {
	var vb voiceBody
	if err := decodeBody(body, max, &vb, voiceFieldCodes); err != nil {
		return nil, err
	}
	if vb.Consent == nil || !*vb.Consent {
		return nil, control.Errorf(control.EConsentRequired,
			"consent must be true: the caller is the speaker or holds their explicit permission")
	}
	if vb.Name == nil {
		return nil, control.Errorf(control.EInvalidRequest, "name is required")
	}
	in, err := vb.validate()
	if err != nil {
		return nil, err
	}
	if vb.BaseVoiceID != nil && *vb.BaseVoiceID != "" {
		if !control.ValidID(*vb.BaseVoiceID) {
			return nil, control.Errorf(control.EInvalidVoiceID, "base_voice_id: no such voice")
		}
		in.baseVoiceID = *vb.BaseVoiceID
	}
	return in, nil
}

// parseVoiceUpdate validates a PATCH /voices/{id} body; consent and
// base_voice_id are not updatable and are ignored like unknown fields.
func parseVoiceUpdate(body []byte, max int) (*voiceInput, error) {
	var vb voiceBody
	if err := decodeBody(body, max, &vb, voiceFieldCodes); err != nil {
		return nil, err
	}
	return vb.validate()
}

func (vb *voiceBody) validate() (*voiceInput, error) {
	in := &voiceInput{}
	if vb.Name != nil {
		name := strings.TrimSpace(*vb.Name)
		if name == "" || utf8.RuneCountInString(name) > maxNameChars || !printable(name) {
			return nil, control.Errorf(control.EInvalidRequest, "name: 1-%d printable characters", maxNameChars)
		}
		in.name = &name
	}
	if vb.Description != nil {
		if utf8.RuneCountInString(*vb.Description) > maxDescriptionChars || !utf8.ValidString(*vb.Description) {
			return nil, control.Errorf(control.EInvalidRequest, "description: at most %d characters", maxDescriptionChars)
		}
		in.description = vb.Description
	}
	if vb.PrimaryLanguage != nil {
		tag, ok := langtag.Canonical(*vb.PrimaryLanguage)
		if !ok {
			return nil, control.Errorf(control.EInvalidLanguage, "primary_language: %q is not a BCP-47 language tag", *vb.PrimaryLanguage)
		}
		in.language = &tag
	}
	if vb.Labels != nil {
		if err := validLabels(*vb.Labels); err != nil {
			return nil, err
		}
		in.labels = vb.Labels
	}
	if len(vb.Settings) > 0 {
		st, err := parseSettings(vb.Settings)
		if err != nil {
			return nil, err
		}
		in.settings = &st
	}
	if vb.Visibility != nil {
		switch *vb.Visibility {
		case "private", "org":
		default:
			return nil, control.Errorf(control.EInvalidRequest, "visibility: private or org")
		}
		in.visibility = vb.Visibility
	}
	return in, nil
}

func validLabels(ls []control.Label) error {
	if len(ls) > maxLabels {
		return control.Errorf(control.EInvalidRequest, "labels: at most %d", maxLabels)
	}
	for _, l := range ls {
		if l.Key == "" || utf8.RuneCountInString(l.Key) > maxLabelKeyChars || !printable(l.Key) ||
			utf8.RuneCountInString(l.Value) > maxLabelValueChars || !printable(l.Value) {
			return control.Errorf(control.EInvalidRequest,
				"labels: each needs a key of 1-%d and a value of at most %d printable characters",
				maxLabelKeyChars, maxLabelValueChars)
		}
	}
	return nil
}

// printable: valid UTF-8 without control or bidirectional formatting
// characters (control.DisplayText), so names and labels
// render safely wherever they are shown.
func printable(s string) bool { return control.DisplayText(s) }

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

// parseSettings validates the settings object against the ranges of
// docs/api.md; every failure is invalid_settings. null and an object
// with no field set mean "not configured" (nil).
func parseSettings(raw json.RawMessage) (*control.VoiceSettings, error) {
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
			return nil, bad("%s must be %s", te.Field, kindName(te.Type))
		}
		return nil, bad("must be an object")
	}
	inRange := func(name string, v *float64, lo, hi float64) error {
		if v != nil && (*v < lo || *v > hi) {
			return bad("%s must be between %g and %g", name, lo, hi)
		}
		return nil
	}
	for _, c := range []struct {
		name   string
		v      *float64
		lo, hi float64
	}{
		{"stability", sb.Stability, 0, 1}, {"similarity", sb.Similarity, 0, 1}, {"style", sb.Style, 0, 1},
		{"speed", sb.Speed, 0.25, 4}, {"pitch", sb.Pitch, -12, 12}, {"volume", sb.Volume, 0, 2},
	} {
		if err := inRange(c.name, c.v, c.lo, c.hi); err != nil {
			return nil, err
		}
	}
	if sb.Emotion != nil && (utf8.RuneCountInString(*sb.Emotion) > maxEmotionChars || !printable(*sb.Emotion)) {
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
	if settingsEmpty(st) {
		return nil, nil
	}
	return st, nil
}

func settingsEmpty(st *control.VoiceSettings) bool {
	return st.Stability == nil && st.Similarity == nil && st.Style == nil && st.Speed == nil &&
		st.Pitch == nil && st.Volume == nil && st.UseSpeakerBoost == nil && st.Emotion == nil &&
		len(st.EngineParams) == 0
}
