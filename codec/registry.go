package codec

// Media types of the registry entries.
const (
	ctOctet = "application/octet-stream"
	ctWAV   = "audio/wav"
	ctMPEG  = "audio/mpeg"
	ctOgg   = "audio/ogg"
	ctFLAC  = "audio/flac"
)

// formatTable is the format registry: one entry per output format, and the
// only place that lists them. NewPipeline, ParseFormat, BytesPerSample,
// AppendPCM and DecodePCM all read it (through lookup). See the package
// documentation for how to add a format.
var formatTable = [...]FormatSpec{
	// Raw linear PCM, little-endian, any rate.
	{Format: S16LE, ContentType: ctOctet, BytesPerSample: 2, Framing: FramingSamples, OutputFormat: true,
		New: newPCMEncoder, put: putS16, get: getS16},
	{Format: S24LE, ContentType: ctOctet, BytesPerSample: 3, Framing: FramingSamples, OutputFormat: true,
		New: newPCMEncoder, put: putS24, get: getS24},
	{Format: S32LE, ContentType: ctOctet, BytesPerSample: 4, Framing: FramingSamples, OutputFormat: true,
		New: newPCMEncoder, put: putS32, get: getS32},
	{Format: F32LE, ContentType: ctOctet, BytesPerSample: 4, Framing: FramingSamples, OutputFormat: true,
		New: newPCMEncoder, put: putF32, get: getF32},
	{Format: F64LE, ContentType: ctOctet, BytesPerSample: 8, Framing: FramingSamples, OutputFormat: true,
		New: newPCMEncoder, put: putF64, get: getF64},
	// G.711, one byte per sample (g711.go).
	{Format: MuLaw, ContentType: ctOctet, BytesPerSample: 1, Framing: FramingSamples, OutputFormat: true,
		New: newPCMEncoder, put: putMuLaw, get: getMuLaw},
	{Format: ALaw, ContentType: ctOctet, BytesPerSample: 1, Framing: FramingSamples, OutputFormat: true,
		New: newPCMEncoder, put: putALaw, get: getALaw},
	// Streaming 16-bit WAV (wav.go).
	{Format: WAV, ContentType: ctWAV, Framing: FramingStream, OutputFormat: true,
		New: newWAVEncoder},
	// Bare 20 ms Opus packets at 48 kHz (opus.go).
	{Format: Opus, ContentType: ctOctet, Framing: FramingPackets, FixedRate: OpusRate, OutputFormat: true,
		New: newOpusEncoder},
	// CBR MP3 at the nearest MPEG rate (mp3.go, mp3_lame.go; fails with
	// ErrNoMP3 in builds tagged nomp3).
	{Format: MP3, ContentType: ctMPEG, Framing: FramingStream, Rate: MP3Rate, OutputFormat: true,
		New: newMP3Stream},
	// The compatible endpoint's containers, not output_format names.
	{Format: OggOpus, ContentType: ctOgg, Framing: FramingStream, FixedRate: OpusRate,
		New: newOggOpusEncoder}, // ogg_opus.go
	{Format: FLAC, ContentType: ctFLAC, Framing: FramingStream,
		New: newFLACStream}, // flac.go
}
