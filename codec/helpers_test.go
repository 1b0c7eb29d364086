package codec

import (
	"bytes"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/hajimehoshi/go-mp3"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// sine returns n samples of a sine of freq Hz at rate and amplitude amp.
func sine(n, rate int, freq, amp float64) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(amp * math.Sin(2*math.Pi*freq*float64(i)/float64(rate)))
	}
	return s
}

// voiceLike is a harmonic-rich test signal with a slow amplitude
// envelope: closer to speech than a pure tone, so codecs cannot cheat.
func voiceLike(n, rate int) []float32 {
	s := make([]float32, n)
	for i := range s {
		t := float64(i) / float64(rate)
		env := 0.6 + 0.4*math.Sin(2*math.Pi*3*t)
		var v float64
		for h := 1; h <= 8; h++ {
			v += math.Sin(2*math.Pi*150*float64(h)*t+float64(h)) / float64(h)
		}
		s[i] = float32(0.25 * env * v)
	}
	return s
}

func rms(s []float32) float64 {
	var sum float64
	for _, v := range s {
		sum += float64(v) * float64(v)
	}
	return math.Sqrt(sum / float64(len(s)))
}

// zeroCrossFreq estimates a tone's frequency from its rising zero
// crossings, interpolated between samples.
func zeroCrossFreq(t *testing.T, s []float32, rate int) float64 {
	t.Helper()
	var first, last float64
	count := -1
	for i := 1; i < len(s); i++ {
		if s[i-1] < 0 && s[i] >= 0 {
			x := float64(i-1) + float64(-s[i-1])/float64(s[i]-s[i-1])
			if count < 0 {
				first = x
			}
			last = x
			count++
		}
	}
	if count < 1 {
		t.Fatalf("no periods found in %d samples", len(s))
	}
	return float64(count) * float64(rate) / (last - first)
}

// bestCorrelation is the highest normalised correlation between ref and
// got over lags 0..maxLag of got (codecs delay, never advance, the signal).
func bestCorrelation(ref, got []float32, maxLag int) (float64, int) {
	best, bestLag := -1.0, 0
	for lag := 0; lag <= maxLag && lag < len(got); lag++ {
		n := min(len(ref), len(got)-lag)
		var xy, xx, yy float64
		for i := 0; i < n; i++ {
			x, y := float64(ref[i]), float64(got[i+lag])
			xy += x * y
			xx += x * x
			yy += y * y
		}
		if c := xy / math.Sqrt(xx*yy+1e-30); c > best {
			best, bestLag = c, lag
		}
	}
	return best, bestLag
}

// run executes an external tool that the test machine must have.
func run(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return out
}

// tempFile writes b to a file named name in a per-test directory.
func tempFile(t *testing.T, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// failingEmit fails on call number n (1-based), to check that errors from
// transports come back unchanged and stop the work.
type failingEmit struct {
	n, calls int
	err      error
}

func (f *failingEmit) emit([]byte) error {
	f.calls++
	if f.calls >= f.n {
		return f.err
	}
	return nil
}

// mp3Length decodes with go-mp3 and returns the sample count per channel.
func mp3Length(t *testing.T, b []byte) (int, int) {
	t.Helper()
	d, err := mp3.NewDecoder(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, d)
	if err != nil {
		t.Fatal(err)
	}
	return int(n / 4), d.SampleRate()
}

// lameDelay is LAME's encoder delay (576) plus the decoder's (529): the
// silence a plain decoder puts before the signal.
const lameDelay = 576 + 529
