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
	// Timestamps asks for word timestamps (docs/api.md#word-timestamps).
	Timestamps    bool
	Pitch         *float64
	Volume        *float64
	GuidanceScale *float64
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
	// Timestamps: the body's timestamps field is read (SSE and the
	// WebSocket, which can send word timestamps; speak cannot).
	Timestamps bool
	// FormatNames, when set, are the protocol's own names for its formats
	// (the compatible endpoint's "opus" is Ogg Opus); nil: the interface's
	// output_format names, limited to Formats.
	FormatNames []WireFormat
	// Names are the protocol's names of the shared fields; zero: ours.
	Names Names
}

// WireFormat is a protocol's name for a format. A name that carries its
// rate ("pcm_16000") sets Rate, which then overrides sample_rate; 0 leaves
// the rate to sample_rate or the default.
type WireFormat struct {
	Name   string
	Format codec.Format
	Rate   int
}

// Names are a protocol's names for the shared fields, used in its errors
// (message and Param). Empty fields are the interface's names.
type Names struct {
	Text, Language, OutputFormat, Speed string
}

func (n Names) text() string         { return or(n.Text, "text") }
func (n Names) language() string     { return or(n.Language, "language") }
func (n Names) outputFormat() string { return or(n.OutputFormat, "output_format") }
func (n Names) speed() string        { return or(n.Speed, "speed") }

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

var (
	// rawFormats: linear PCM, then G.711 for telephony (one byte a sample,
	// at any allowed rate; telephony uses 8000).
	rawFormats = []codec.Format{codec.S16LE, codec.S24LE, codec.S32LE, codec.F32LE, codec.F64LE, codec.MuLaw, codec.ALaw}
	// SpeakRules: POST /voices/{id}/speak (docs/api.md#speak).
	SpeakRules = Rules{Format: codec.WAV, Formats: append([]codec.Format{codec.WAV}, rawFormats...),
		MaxTextChars: MaxTextChars, Speed: true}
	// StreamRules: POST /voices/{id}/stream, raw samples only, f32le by default.
	StreamRules = Rules{Format: codec.F32LE, Formats: rawFormats, MaxTextChars: MaxTextChars, Speed: true, Timestamps: true}
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
	o := r.defaults()
	if err := r.text(&o, f.Text); err != nil {
		return o, err
	}
	if err := r.language(&o, f.Language); err != nil {
		return o, err
	}
	if err := r.format(&o, f.OutputFormat); err != nil {
		return o, err
	}
	if err := r.sampleRate(&o, f.SampleRate); err != nil {
		return o, err
	}
	if err := r.numStep(&o, f.NumStep); err != nil {
		return o, err
	}
	if err := r.expressiveness(&o, f.Expressiveness); err != nil {
		return o, err
	}
	if err := r.speed(&o, f.Speed); err != nil {
		return o, err
	}
	if r.Timestamps {
		v, err := Bool("timestamps", f.Timestamps)
		if err != nil {
			return o, err
		}
		o.Timestamps = v
	}
	return o, nil
}

// The rules of each shared field, one function each: every protocol's
// parser (Options here, ParseOpenAI and the dialects' parsers) calls
// these, in its own order and under its own field names (Rules.Names), so
// a limit or a range is written once. Each error names the field as the
// protocol spells it (control.Error.Param).

func (r *Rules) defaults() Options {
	return Options{Format: r.Format, SampleRate: DefaultSampleRate, NumStep: DefaultNumStep, Language: r.DefaultLanguage}
}

// fail is a refusal of the field named n in the protocol's spelling.
func fail(code, param, format string, args ...any) error {
	e := control.Errorf(code, format, args...)
	e.Param = param
	return e
}

func (r *Rules) text(o *Options, raw []byte) error {
	n := r.Names.text()
	switch text, ok := decodeString(raw); {
	case IsNull(raw) && !r.TextOptional:
		return fail(control.ETextRequired, n, "%s is required", n)
	case IsNull(raw):
	case !ok:
		return fail(control.EInvalidRequest, n, "%s must be a string", n)
	case strings.TrimSpace(text) == "" && !r.TextOptional:
		return fail(control.ETextRequired, n, "%s is required", n)
	default:
		if c := control.CountChars(text); c > int64(r.MaxTextChars) {
			return fail(control.ETextTooLong, n, "%s has %d characters; the limit is %d", n, c, r.MaxTextChars)
		}
		o.Text = text
	}
	return nil
}

// language must be a well-formed BCP-47 tag, canonicalised (the engine's
// support is Prepare's: langtag.Match).
func (r *Rules) language(o *Options, raw []byte) error {
	if IsNull(raw) {
		return nil
	}
	lang, ok := decodeString(raw)
	tag, wellFormed := langtag.Canonical(lang)
	if !ok || lang != "" && !wellFormed {
		n := r.Names.language()
		return fail(control.EInvalidLanguage, n, "%s must be a BCP-47 tag such as \"en\" or \"hi\"", n)
	}
	if tag != "" {
		o.Language = tag
	}
	return nil
}

func (r *Rules) format(o *Options, raw []byte) error {
	if IsNull(raw) {
		return nil
	}
	s, _ := decodeString(raw)
	return r.FormatName(o, s)
}

// FormatName applies the format named s (a protocol that takes its format
// outside the JSON body, such as a query parameter, calls it directly):
// unknown names are invalid_output_format listing the offered ones (or the
// default, r.CoerceFormat); a name that carries its rate sets SampleRate.
func (r *Rules) FormatName(o *Options, s string) error {
	n := r.Names.outputFormat()
	fm, rate, ok := r.parseFormat(s)
	switch {
	case ok:
		o.Format = fm
		if rate > 0 {
			o.SampleRate = rate
		}
	case !r.CoerceFormat:
		return fail(control.EInvalidOutputFormat, n, "%s must be one of %s", n, r.formatList())
	}
	return r.available(o)
}

// available refuses a format this build cannot encode (MP3 without lame).
func (r *Rules) available(o *Options) error {
	if o.Format != codec.MP3 || codec.MP3Available {
		return nil
	}
	return fail(control.EUnsupportedFormat, r.Names.outputFormat(),
		"this deployment has no MP3 encoder; ask for one of %s", r.formatList())
}

// parseFormat maps a wire name to a format this protocol offers, and the
// rate the name carries (0: none).
func (r *Rules) parseFormat(s string) (codec.Format, int, bool) {
	if r.FormatNames != nil {
		w, ok := lookupWire(r.FormatNames, s)
		return w.Format, w.Rate, ok
	}
	fm, ok := codec.ParseFormat(s)
	return fm, 0, ok && slices.Contains(r.Formats, fm)
}

func (r *Rules) sampleRate(o *Options, raw []byte) error {
	if !IsNull(raw) {
		v, ok := integer(raw, MinSampleRate, MaxSampleRate)
		if !ok {
			return fail(control.EInvalidSampleRate, "sample_rate", "sample_rate must be an integer from %d to %d", MinSampleRate, MaxSampleRate)
		}
		o.SampleRate = v
	}
	if o.Format == codec.Opus {
		o.SampleRate = codec.OpusRate
	}
	return nil
}

func (r *Rules) numStep(o *Options, raw []byte) error {
	if IsNull(raw) {
		return nil
	}
	v, ok := integer(raw, 1, MaxNumStep)
	if !ok {
		return fail(control.EInvalidNumStep, "num_step", "num_step must be an integer from 1 to %d", MaxNumStep)
	}
	o.NumStep = v
	return nil
}

func (r *Rules) expressiveness(o *Options, raw []byte) error {
	if IsNull(raw) {
		return nil
	}
	v, ok := number(raw)
	if !ok || v < 0 || v > 1 {
		return fail(control.EInvalidExpressive, "expressiveness", "expressiveness must be a number from 0 to 1")
	}
	o.Expressiveness = &v
	return nil
}

// speed is a rate multiplier, MinSpeed to MaxSpeed, on the protocols that
// read it (Rules.Speed).
func (r *Rules) speed(o *Options, raw []byte) error {
	if !r.Speed || IsNull(raw) {
		return nil
	}
	v, ok := number(raw)
	if !ok || v < MinSpeed || v > MaxSpeed {
		n := r.Names.speed()
		return fail(control.EInvalidSpeed, n, "%s must be a number from %g to %g", n, MinSpeed, MaxSpeed)
	}
	o.Speed = &v
	return nil
}

// lookupWire finds the format a protocol names s.
func lookupWire(names []WireFormat, s string) (WireFormat, bool) {
	for _, w := range names {
		if w.Name == s {
			return w, true
		}
	}
	return WireFormat{}, false
}

// wireList names a protocol's formats for an error message.
func wireList(names []WireFormat) string {
	s := make([]string, len(names))
	for i, w := range names {
		s[i] = w.Name
	}
	return strings.Join(s, ", ")
}

// formatList names the offered formats for an error message.
func (r *Rules) formatList() string {
	if r.FormatNames != nil {
		return wireList(r.FormatNames)
	}
	var names []string
	for _, f := range r.Formats {
		names = append(names, string(f))
	}
	return strings.Join(names, ", ")
}

// Volume bounds a request's volume, a gain: the voice settings' range
// (docs/api.md#voice-settings).
const (
	MinVolume = 0.0
	MaxVolume = 2.0
)

// volume is a gain, MinVolume to MaxVolume, on the protocols that carry
// one (the Cartesia dialect's generation_config.volume), named param.
func (r *Rules) volume(o *Options, raw []byte, param string) error {
	if IsNull(raw) {
		return nil
	}
	v, ok := number(raw)
	if !ok || v < MinVolume || v > MaxVolume {
		return fail(control.EInvalidRequest, param, "%s must be a number from %g to %g", param, MinVolume, MaxVolume)
	}
	o.Volume = &v
	return nil
}
