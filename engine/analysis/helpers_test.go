package analysis

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Clips are rendered with the espeak-ng and sox CLIs into one temp dir per
// test binary and cached by name, so every clip is made once.
var (
	clipDir   string
	clipMu    sync.Mutex
	clipMakes = map[string]*clipMake{}
)

// clipMake makes one clip once; makers may depend on other clips.
type clipMake struct {
	once sync.Once
	err  error
}

func TestMain(m *testing.M) {
	d, err := os.MkdirTemp("", "analysis-clips-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	clipDir = d
	code := m.Run()
	os.RemoveAll(d)
	os.Exit(code)
}

// texts are ~12-15 s at espeak's default rate; the clone renders the same
// text as its reference so formant medians compare like with like.
var texts = map[string]string{
	"en": "The old lighthouse keeper walked along the shore every morning, counting the boats that came back from the sea. " +
		"He remembered the names of all the sailors, and he waved to each of them as they passed. " +
		"When the weather turned bad, he lit the lamp early and waited until every boat was safely home.",
	"de": "Der alte Leuchtturmwärter ging jeden Morgen am Ufer entlang und zählte die Boote, die vom Meer zurückkamen. " +
		"Er kannte die Namen aller Seeleute und winkte jedem von ihnen zu. " +
		"Wenn das Wetter schlecht wurde, zündete er die Lampe früh an und wartete, bis jedes Boot sicher zu Hause war.",
	"fr": "Le vieux gardien du phare marchait chaque matin le long du rivage en comptant les bateaux qui revenaient de la mer. " +
		"Il connaissait le nom de tous les marins et il saluait chacun d'eux au passage. " +
		"Quand le temps devenait mauvais, il allumait la lampe plus tôt et attendait que chaque bateau soit rentré.",
	"hi": "बूढ़ा प्रकाश स्तंभ रक्षक हर सुबह किनारे पर चलता था और समुद्र से लौटने वाली नावों को गिनता था। " +
		"वह सभी नाविकों के नाम जानता था और हर एक को हाथ हिलाकर नमस्ते करता था। " +
		"जब मौसम खराब होता था, तो वह दीपक जल्दी जलाता था और तब तक इंतजार करता था जब तक हर नाव सुरक्षित घर न आ जाए।",
}

func needTools(t testing.TB) {
	t.Helper()
	for _, tool := range []string{"espeak-ng", "sox"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
}

// clip runs make once for name and returns the path of the file it wrote.
func clip(t testing.TB, name string, make func(out string) error) string {
	t.Helper()
	clipMu.Lock()
	m := clipMakes[name]
	if m == nil {
		m = &clipMake{}
		clipMakes[name] = m
	}
	clipMu.Unlock()
	out := filepath.Join(clipDir, name+".wav")
	m.once.Do(func() { m.err = make(out) })
	if m.err != nil {
		t.Fatalf("making clip %s: %v", name, m.err)
	}
	return out
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// speak renders text with espeak-ng; extra are further CLI flags.
func speak(t testing.TB, name, voice string, pitch, wpm int, text string, extra ...string) string {
	needTools(t)
	return clip(t, name, func(out string) error {
		args := append([]string{"-v", voice, "-p", fmt.Sprint(pitch), "-s", fmt.Sprint(wpm), "-w", out}, extra...)
		return run("espeak-ng", append(args, text)...)
	})
}

// soxed applies sox effects to in.
func soxed(t testing.TB, name, in string, effects ...string) string {
	return clip(t, name, func(out string) error {
		return run("sox", append([]string{in, "-b", "16", out}, effects...)...)
	})
}

// readWAV reads a PCM16 or float32 mono/stereo RIFF file as mono float32.
func readWAV(t testing.TB, path string) ([]float32, int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 12 || string(b[:4]) != "RIFF" || string(b[8:12]) != "WAVE" {
		t.Fatalf("%s: not a WAV file", path)
	}
	var format, channels, bits, rate int
	for p := 12; p+8 <= len(b); {
		id, size := string(b[p:p+4]), int(binary.LittleEndian.Uint32(b[p+4:p+8]))
		body := b[p+8:]
		if size > len(body) || size < 0 { // streamed WAVs may leave size unset
			size = len(body)
		}
		switch id {
		case "fmt ":
			format = int(binary.LittleEndian.Uint16(body[0:2]))
			channels = int(binary.LittleEndian.Uint16(body[2:4]))
			rate = int(binary.LittleEndian.Uint32(body[4:8]))
			bits = int(binary.LittleEndian.Uint16(body[14:16]))
		case "data":
			return decodePCM(t, body[:size], format, channels, bits), rate
		}
		p += 8 + size + size%2
	}
	t.Fatalf("%s: no data chunk", path)
	return nil, 0
}

func decodePCM(t testing.TB, d []byte, format, channels, bits int) []float32 {
	bps := bits / 8
	n := len(d) / (bps * channels)
	out := make([]float32, n)
	for i := range out {
		var sum float32
		for c := 0; c < channels; c++ {
			o := (i*channels + c) * bps
			switch {
			case bits == 16:
				sum += float32(int16(binary.LittleEndian.Uint16(d[o:]))) / 32768
			case bits == 32 && format == 3:
				sum += math.Float32frombits(binary.LittleEndian.Uint32(d[o:]))
			default:
				t.Fatalf("unsupported WAV format %d/%d bits", format, bits)
			}
		}
		out[i] = sum / float32(channels)
	}
	return out
}

func analyzeFile(t testing.TB, path string) Report {
	t.Helper()
	s, rate := readWAV(t, path)
	r, err := Analyze(s, rate)
	if err != nil {
		t.Fatalf("%s: %v", filepath.Base(path), err)
	}
	return r
}

func analyzeErr(t testing.TB, path string) error {
	t.Helper()
	s, rate := readWAV(t, path)
	_, err := Analyze(s, rate)
	return err
}

func isUnusable(err error) bool {
	var se *SpeechError
	return errors.As(err, &se)
}

func pctErr(got, want float64) float64 { return 100 * (got - want) / want }
