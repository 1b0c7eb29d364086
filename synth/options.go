package synth

import (
	"slices"
	"strings"

	"voicesvc/codec"
	"voicesvc/control"
	"voicesvc/langtag"
)

// Request limits (docs/api.md#limits).
const (
	MaxTextChars      = 10_000 // code points, control.CountChars
	MinSampleRate     = 8_000
	MaxSampleRate     = 48_000
	DefaultSampleRate = 24_000
	MaxNumStep        = 32
	DefaultNumStep    = 32
	// MinSpeed and MaxSpeed bound the speed field, a rate multiplier: a
	// quarter to four times the voice's pace (the widely used third-party
	// speech API's range, so its clients' values pass unchanged).
	MinSpeed = 0.25
	MaxSpeed = 4.0
)

// Options is a validated synthesis request, the same for every transport.
type Options struct {
	Text       string
	Language   string // BCP-47, well formed; "" = the voice's primary language
	Format     codec.Format
	SampleRate int
	NumStep    int
	// Nil fields fall back to the voice's settings, then the engine default.
	// Speak and stream bodies set Expressiveness and Speed; the others are
	// for transports that carry them (WebSocket length_scale is 1/Speed).
	Expressiveness *float64
	Speed          *float64
	Pitch          *float64
	Volume         *float64
	GuidanceScale  *float64
}

// Chars is what the request is metered and limited by.
func (o Options) Chars() int64 { return control.CountChars(o.Text) }

// Rules are what the transports do differently with the shared fields.
type Rules struct {
	// Format is the default output format; Formats are those offered.
	Format  codec.Format
	Formats []codec.Format
	// CoerceFormat: an output_format outside Formats, of any type, means
	// the default instead of invalid_output_format (the WebSocket: its
	// client reads the real format from task_started).
	CoerceFormat bool
	// TextOptional: text may be absent or blank (a WebSocket context takes
	// its text in later frames).
	TextOptional bool
	// MaxTextChars: text of more code points is text_too_long.
	MaxTextChars int
	// DefaultLanguage is the language when the request names none; ""
	// leaves it to the voice's primary language (Prepare).
	DefaultLanguage string
	// Speed: the body's speed field is read (speak and SSE); without it the
	// key is ignored like any unknown one (the WebSocket has length_scale).
	Speed bool
}

var (
	// rawFormats: linear PCM, then G.711 for telephony (one byte a sample,
	// at any allowed rate; telephony uses 8000).
	rawFormats = []codec.Format{codec.S16LE, codec.S24LE, codec.S32LE, codec.F32LE, codec.F64LE, codec.MuLaw, codec.ALaw}
	// SpeakRules: POST /voices/{id}/speak (docs/api.md#speak).
	SpeakRules = Rules{Format: codec.WAV, Formats: append([]codec.Format{codec.WAV}, rawFormats...),
		MaxTextChars: MaxTextChars, Speed: true}
	// StreamRules: POST /voices/{id}/stream, raw samples only, f32le by default.
	StreamRules = Rules{Format: codec.F32LE, Formats: rawFormats, MaxTextChars: MaxTextChars, Speed: true}
)

// ParseSpeak validates a POST /voices/{id}/speak body. The default format
// is wav. Every error is a 400 *control.Error.
func ParseSpeak(body []byte) (Options, error) { return Parse(body, SpeakRules) }

// ParseStream validates a POST /voices/{id}/stream body: raw samples only
// (linear PCM, mulaw, alaw), f32le by default; wav is invalid_output_format.
func ParseStream(body []byte) (Options, error) { return Parse(body, StreamRules) }

// Parse validates a JSON body under r (Scan, then Fields.Options).
func Parse(body []byte, r Rules) (Options, error) {
	f, err := Scan(body)
	if err != nil {
		return Options{}, err
	}
	return f.Options(r)
}

// Options validates the shared fields under r. The rules, per field, when
// a value is present and not null (null is read as absent for optional
// fields and as missing for text):
//
//	text            string, not blank      else text_required / invalid_request (not a string)
//	                at most r.MaxTextChars else text_too_long
//	language        a BCP-47 tag           else invalid_language (engine support: langtag.Match)
//	output_format   one of r.Formats       else invalid_output_format (or the default, r.CoerceFormat)
//	sample_rate     integer 8000-48000     else invalid_sample_rate (24000.0 is an integer)
//	num_step        integer 1-32           else invalid_num_step
//	expressiveness  number 0-1             else invalid_expressiveness
//	speed           number 0.25-4          else invalid_speed (r.Speed; else ignored)
//
// A wrong type is refused with the field's own code. Fields are checked in
// the order above whatever their order in the body, so one body always
// answers one code. Opus is always 48 kHz, whatever sample_rate says.
func (f *Fields) Options(r Rules) (Options, error) {
	o := Options{Format: r.Format, SampleRate: DefaultSampleRate, NumStep: DefaultNumStep, Language: r.DefaultLanguage}

	switch text, ok := decodeString(f.Text); {
	case IsNull(f.Text) && !r.TextOptional:
		return o, control.Errorf(control.ETextRequired, "text is required")
	case IsNull(f.Text):
	case !ok:
		return o, control.Errorf(control.EInvalidRequest, "text must be a string")
	case strings.TrimSpace(text) == "" && !r.TextOptional:
		return o, control.Errorf(control.ETextRequired, "text is required")
	default:
		if n := control.CountChars(text); n > int64(r.MaxTextChars) {
			return o, control.Errorf(control.ETextTooLong, "text has %d characters; the limit is %d", n, r.MaxTextChars)
		}
		o.Text = text
	}

	if !IsNull(f.Language) {
		lang, ok := decodeString(f.Language)
		tag, wellFormed := langtag.Canonical(lang)
		if !ok || lang != "" && !wellFormed {
			return o, control.Errorf(control.EInvalidLanguage, "language must be a BCP-47 tag such as \"en\" or \"hi\"")
		}
		if tag != "" {
			o.Language = tag
		}
	}

	if !IsNull(f.OutputFormat) {
		s, _ := decodeString(f.OutputFormat)
		fm, ok := codec.ParseFormat(s)
		switch {
		case ok && slices.Contains(r.Formats, fm):
			o.Format = fm
		case !r.CoerceFormat:
			return o, control.Errorf(control.EInvalidOutputFormat, "output_format must be one of %s", formatList(r.Formats))
		}
	}

	if !IsNull(f.SampleRate) {
		v, ok := integer(f.SampleRate, MinSampleRate, MaxSampleRate)
		if !ok {
			return o, control.Errorf(control.EInvalidSampleRate, "sample_rate must be an integer from %d to %d", MinSampleRate, MaxSampleRate)
		}
		o.SampleRate = v
	}
	if o.Format == codec.Opus {
		o.SampleRate = codec.OpusRate
	}

	if !IsNull(f.NumStep) {
		v, ok := integer(f.NumStep, 1, MaxNumStep)
		if !ok {
			return o, control.Errorf(control.EInvalidNumStep, "num_step must be an integer from 1 to %d", MaxNumStep)
		}
		o.NumStep = v
	}

	if !IsNull(f.Expressiveness) {
		v, ok := number(f.Expressiveness)
		if !ok || v < 0 || v > 1 {
			return o, control.Errorf(control.EInvalidExpressive, "expressiveness must be a number from 0 to 1")
		}
		o.Expressiveness = &v
	}

	if r.Speed && !IsNull(f.Speed) {
		v, ok := number(f.Speed)
		if !ok || v < MinSpeed || v > MaxSpeed {
			return o, control.Errorf(control.EInvalidSpeed, "speed must be a number from %g to %g", MinSpeed, MaxSpeed)
		}
		o.Speed = &v
	}
	return o, nil
}

// formatList names formats for an error message.
func formatList(fs []codec.Format) string {
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = string(f)
	}
	return strings.Join(names, ", ")
}
