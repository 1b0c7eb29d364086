package cloning

import (
	"errors"
	"os"
	"path/filepath"

	"voicesvc/codec"
)

// writeWAV writes 16-bit mono PCM atomically (a temporary file, then a
// rename), so the media route never serves half a file. The temporary file
// has a name of its own (two runs of one job may overlap when a lease
// lapses), and it is removed on every failure: a full disk must not fill
// the media directory with *.tmp left-overs.
func writeWAV(path string, pcm []float32, rate int) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b := codec.AppendWAVHeader(make([]byte, 0, 44+2*len(pcm)), rate, 16, false, 2*len(pcm))
	b = codec.AppendPCM(b, codec.S16LE, pcm)
	f, err := os.CreateTemp(dir, filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.Remove(f.Name())
		}
	}()
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644) // CreateTemp makes 0600; the file is public
	}
	if err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// removePreview deletes a preview this run wrote but that must not stay
// public (the job did not succeed with it, e.g. its voice was deleted while
// the preview was being rendered). A file already gone is fine.
func removePreview(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
