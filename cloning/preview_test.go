package cloning

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A preview that cannot be written whole leaves nothing behind in the media
// directory: a full disk (here a file size limit, RLIMIT_FSIZE, set in a
// child process so that it binds no other test) fails the write, and a
// target that cannot be replaced fails the rename.
func TestWriteWAVLeavesNoTempFile(t *testing.T) {
	pcm := make([]float32, 16000) // 32,044 bytes of WAV
	cases := []struct {
		name  string
		setup func(t *testing.T, dir string) error // returns the writeWAV error
	}{
		{"disk full", func(t *testing.T, dir string) error {
			cmd := exec.Command(os.Args[0], "-test.run=^TestWriteWAVChild$")
			cmd.Env = append(os.Environ(), "CLONING_WAV_CHILD_DIR="+dir)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
			if !strings.Contains(string(out), "writeWAV failed:") {
				t.Fatalf("the size limit did not fail the write:\n%s", out)
			}
			return nil
		}},
		{"rename refused", func(t *testing.T, dir string) error {
			// A non-empty directory where the file should go.
			target := filepath.Join(dir, "v-j.wav")
			if err := os.MkdirAll(filepath.Join(target, "x"), 0o755); err != nil {
				t.Fatal(err)
			}
			err := writeWAV(target, pcm, 16000)
			if err == nil {
				t.Fatal("writeWAV over a directory succeeded")
			}
			return err
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			c.setup(t, dir)
			matches, _ := filepath.Glob(filepath.Join(dir, "*tmp*"))
			if len(matches) > 0 {
				t.Errorf("temporary files left behind: %v", matches)
			}
		})
	}
}

// TestWriteWAVChild runs in the child of TestWriteWAVLeavesNoTempFile: it
// caps the size of files this process may write at 4 KiB, then writes a
// 32 KiB preview. Go ignores SIGXFSZ, so the write fails with EFBIG.
func TestWriteWAVChild(t *testing.T) {
	dir := os.Getenv("CLONING_WAV_CHILD_DIR")
	if dir == "" {
		t.Skip("child process of TestWriteWAVLeavesNoTempFile")
	}
	lim := syscall.Rlimit{Cur: 4 << 10, Max: 4 << 10}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Fatal(err)
	}
	err := writeWAV(filepath.Join(dir, "v-j.wav"), make([]float32, 16000), 16000)
	if err == nil {
		t.Fatal("writeWAV succeeded past RLIMIT_FSIZE")
	}
	os.Stdout.WriteString("writeWAV failed: " + err.Error() + "\n")
}
