package native

import (
	"math"
	"strconv"

	"voicesvc/control"
	"voicesvc/jsonw"
	"voicesvc/synth"
	"voicesvc/web"
)

// The voice and job JSON of docs/api.md#voice-object, #job-object, written
// by hand: GET /voices/{id} is a hot path and reflection would cost more
// than the rest of the request. Only the listed fields are written; a
// voice never shows created_by, metadata, deleted_at, its profile or its
// consent record.

func appendString(b []byte, s string) []byte { return jsonw.AppendString(b, s) }

// appendKey appends `,"name":` (or `"name":` as the first field).
func appendKey(b []byte, first bool, name string) []byte {
	if !first {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, name...)
	return append(b, '"', ':')
}

// voiceData writes {"voice": <voice>}, with the workspace's own names for it.
func voiceData(v *control.Voice, aliases []string) func([]byte) []byte {
	return func(b []byte) []byte {
		b = append(b, `{"voice":`...)
		b = appendVoice(b, v, aliases)
		return append(b, '}')
	}
}

// appendVoicePage writes the data of GET /voices.
func appendVoicePage(b []byte, l *synth.VoicePage) []byte {
	b = append(b, `{"voices":[`...)
	for i, v := range l.Voices {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendVoice(b, v, l.Aliases[v.ID])
	}
	b = append(b, `],"page":`...)
	b = strconv.AppendInt(b, int64(l.Page), 10)
	b = append(b, `,"page_size":`...)
	b = strconv.AppendInt(b, int64(l.PageSize), 10)
	b = append(b, `,"total":`...)
	b = strconv.AppendInt(b, int64(l.Total), 10)
	b = append(b, `,"has_more":`...)
	b = strconv.AppendBool(b, l.Page*l.PageSize < l.Total)
	return append(b, '}')
}

// appendVoice writes the voice object; aliases are the asking workspace's
// names for it (workspace_aliases, always present).
func appendVoice(b []byte, v *control.Voice, aliases []string) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, v.ID)
	b = append(b, `,"name":`...)
	b = appendString(b, v.Name)
	if v.Description != "" {
		b = append(b, `,"description":`...)
		b = appendString(b, v.Description)
	}
	b = append(b, `,"status":`...)
	b = appendString(b, v.Status)
	b = append(b, `,"clone_method":`...)
	b = appendString(b, v.CloneMethod)
	b = append(b, `,"visibility":`...)
	b = appendString(b, v.Visibility)
	b = append(b, `,"primary_language":`...)
	b = appendString(b, v.PrimaryLanguage)
	b = append(b, `,"labels":[`...)
	for i, l := range v.Labels {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"key":`...)
		b = appendString(b, l.Key)
		b = append(b, `,"value":`...)
		b = appendString(b, l.Value)
		b = append(b, '}')
	}
	b = append(b, ']')
	if v.Settings != nil && !synth.SettingsEmpty(v.Settings) {
		b = append(b, `,"settings":`...)
		b = appendSettings(b, v.Settings)
	}
	if v.SampleAudioURL != "" {
		b = append(b, `,"sample_audio_url":`...)
		b = appendString(b, v.SampleAudioURL)
	}
	if v.BaseVoiceID != "" {
		b = append(b, `,"base_voice_id":`...)
		b = appendString(b, v.BaseVoiceID)
	}
	if v.Alias != "" {
		b = append(b, `,"alias":`...)
		b = appendString(b, v.Alias)
	}
	b = appendNames(append(b, `,"workspace_aliases":`...), aliases)
	b = append(b, `,"org_id":`...)
	b = appendString(b, v.OrgID)
	b = append(b, `,"created_at":`...)
	b = strconv.AppendInt(b, v.CreatedAt, 10)
	b = append(b, `,"updated_at":`...)
	b = strconv.AppendInt(b, v.UpdatedAt, 10)
	return append(b, '}')
}

func appendSettings(b []byte, st *control.VoiceSettings) []byte {
	first := true
	num := func(name string, v *float64) {
		if v == nil {
			return
		}
		b = appendKey(b, first, name)
		b = appendFloat(b, *v)
		first = false
	}
	b = append(b, '{')
	num("stability", st.Stability)
	num("similarity", st.Similarity)
	num("style", st.Style)
	num("speed", st.Speed)
	num("pitch", st.Pitch)
	num("volume", st.Volume)
	if st.UseSpeakerBoost != nil {
		b = appendKey(b, first, "use_speaker_boost")
		b = strconv.AppendBool(b, *st.UseSpeakerBoost)
		first = false
	}
	if st.Emotion != nil {
		b = appendKey(b, first, "emotion")
		b = appendString(b, *st.Emotion)
		first = false
	}
	if len(st.EngineParams) > 0 {
		b = appendKey(b, first, "engine_params")
		b = web.Marshal(st.EngineParams)(b)
	}
	return append(b, '}')
}

// appendFloat writes a float as encoding/json would for the ranges settings
// allow; non-finite values cannot come from JSON and are written as 0.
func appendFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, '0')
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	return strconv.AppendFloat(b, f, format, -1, 64)
}

// appendJob writes the Job of docs/api.md#job-object.
func appendJob(b []byte, j *control.Job) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, j.ID)
	b = append(b, `,"voice_id":`...)
	b = appendString(b, j.VoiceID)
	b = append(b, `,"org_id":`...)
	b = appendString(b, j.OrgID)
	b = append(b, `,"job_type":`...)
	b = appendString(b, j.JobType)
	b = append(b, `,"status":`...)
	b = appendString(b, j.Status)
	b = append(b, `,"progress":`...)
	b = strconv.AppendInt(b, int64(j.Progress), 10)
	if j.Status == control.JobFailed && j.Error != nil {
		b = append(b, `,"error":{"code":`...)
		b = appendString(b, j.Error.Code)
		b = append(b, `,"message":`...)
		b = appendString(b, j.Error.Message)
		b = append(b, '}')
	}
	return append(b, '}')
}

// appendNames writes a JSON array of names ([] for none).
func appendNames(b []byte, names []string) []byte {
	b = append(b, '[')
	for i, a := range names {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, a)
	}
	return append(b, ']')
}

// aliasData writes the data of GET and PUT /voices/{id}/aliases.
func aliasData(voiceID string, aliases []string) func([]byte) []byte {
	return func(b []byte) []byte {
		b = append(b, `{"voice_id":`...)
		b = appendString(b, voiceID)
		b = append(b, `,"aliases":`...)
		return append(appendNames(b, aliases), '}')
	}
}
