package codec

// Encoder turns float32 mono samples, already at the rate its FormatSpec
// chose (FormatSpec.OutputRate), into the bytes of one output format.
//
// An encoder writes to the emit function of each call, the way an
// io.Writer-wrapping muxer (pion's oggwriter) writes to its output: emit
// gets whole units of the format (see Framing) in a slice owned by the
// encoder and valid only during the call, so the per-chunk path copies
// nothing and, once warm, allocates nothing. An emit error is returned as
// is and the stream is then abandoned. Nothing is emitted for a call that
// completed no unit.
//
// The Pipeline calls Write for every chunk, Flush once at the end of the
// stream (which drains the encoder: a second Flush emits nothing), and
// Close, which frees any C state, must be idempotent and must work without
// a Flush (an abandoned stream). Not safe for concurrent use.
type Encoder interface {
	Write(samples []float32, emit func([]byte) error) error
	Flush(emit func([]byte) error) error
	Close() error
}

// EncoderConfig is what a format's constructor is given.
type EncoderConfig struct {
	// Format is the format asked for (one constructor may serve several
	// formats, as the raw PCM one does).
	Format Format
	// InputRate is the engine's rate, before any resampling (Ogg Opus
	// records it in its header).
	InputRate int
	// Rate is the rate of the samples Write gets: FormatSpec.OutputRate of
	// the rate the client asked for.
	Rate int
}

// Framing says what one emitted unit of a format is.
type Framing int

const (
	// FramingSamples: headerless raw samples, BytesPerSample bytes each;
	// a unit holds whole samples and the stream may be cut between any two.
	FramingSamples Framing = iota
	// FramingPackets: one codec packet per unit (bare Opus); the transport
	// must keep the boundaries, for the bytes alone do not delimit packets.
	FramingPackets
	// FramingStream: a self-delimiting byte stream, header first (WAV, Ogg
	// pages, FLAC frames, MP3 frames); units may be concatenated.
	FramingStream
)

// FormatSpec is one entry of the format registry (registry.go): everything
// the package and its callers need to know about an output format, and how
// to make its encoder.
type FormatSpec struct {
	Format Format
	// ContentType is the media type of the stream as a file or an HTTP
	// body; application/octet-stream where the format has none of its own.
	ContentType string
	// BytesPerSample is the width of one mono sample of a raw format
	// (Framing FramingSamples) and 0 for containers and codecs.
	BytesPerSample int
	Framing        Framing
	// FixedRate is the only rate the format encodes at (Opus: 48000), 0
	// when it takes others; Rate, when set, maps a requested rate to one
	// the format supports (MP3Rate). See OutputRate.
	FixedRate int
	Rate      func(requested int) int
	// OutputFormat: the name is an output_format of the public interface,
	// accepted by ParseFormat (the compatible endpoint's containers are
	// not).
	OutputFormat bool
	// New makes an encoder for one stream.
	New func(EncoderConfig) (Encoder, error)

	// Raw formats only: put writes len(s) samples into out, which holds
	// exactly BytesPerSample*len(s) bytes (AppendPCM); get decodes whole
	// samples back (DecodePCM).
	put func(out []byte, s []float32)
	get func(out []float32, b []byte)
}

// OutputRate is the rate the format encodes at when a client asks for
// requested.
func (s *FormatSpec) OutputRate(requested int) int {
	switch {
	case s.FixedRate > 0:
		return s.FixedRate
	case s.Rate != nil:
		return s.Rate(requested)
	}
	return requested
}

// registry maps each format to its entry; init fills it from formatTable.
// (It is built in init rather than by an initializer because the entries'
// functions reach lookup, which would be an initialization cycle.)
var registry map[Format]*FormatSpec

func init() {
	registry = make(map[Format]*FormatSpec, len(formatTable))
	for i := range formatTable {
		s := &formatTable[i]
		if _, dup := registry[s.Format]; dup || s.New == nil {
			panic("codec: bad registry entry " + string(s.Format))
		}
		if (s.BytesPerSample > 0) != (s.put != nil && s.get != nil && s.Framing == FramingSamples) {
			panic("codec: raw format " + string(s.Format) + " needs put, get and FramingSamples")
		}
		registry[s.Format] = s
	}
}

func lookup(f Format) *FormatSpec { return registry[f] }

// LookupFormat returns the registry entry of f (a copy: the registry
// cannot be changed from outside).
func LookupFormat(f Format) (FormatSpec, bool) {
	if s := lookup(f); s != nil {
		return *s, true
	}
	return FormatSpec{}, false
}

// Formats lists the registered formats in registry order.
func Formats() []Format {
	out := make([]Format, len(formatTable))
	for i := range formatTable {
		out[i] = formatTable[i].Format
	}
	return out
}

// appender is the append-style encoder shape of FLACEncoder and
// MP3Encoder: Encode and Flush append whatever bytes the library completed.
type appender interface {
	Encode(dst []byte, samples []float32) ([]byte, error)
	Flush(dst []byte) ([]byte, error)
	Close() error
}

// appendEncoder adapts an appender to Encoder, with one reused buffer.
type appendEncoder struct {
	a   appender
	out []byte
}

func (e *appendEncoder) Write(samples []float32, emit func([]byte) error) error {
	var err error
	if e.out, err = e.a.Encode(e.out[:0], samples); err != nil {
		return err
	}
	return emitNonEmpty(e.out, emit)
}

func (e *appendEncoder) Flush(emit func([]byte) error) error {
	var err error
	if e.out, err = e.a.Flush(e.out[:0]); err != nil {
		return err
	}
	return emitNonEmpty(e.out, emit)
}

func (e *appendEncoder) Close() error { return e.a.Close() }

func emitNonEmpty(b []byte, emit func([]byte) error) error {
	if len(b) == 0 {
		return nil
	}
	return emit(b)
}
