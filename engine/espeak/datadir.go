package espeak

import (
	"fmt"
	"os"
	"path/filepath"
)

// newDataDir mirrors system (espeak-ng-data) into a temporary directory:
// every entry is a symbolic link except voices/!v, a real directory of
// links to the stock variants, where generated variants can be written
// without touching the system files.
func newDataDir(system string) (*dataDir, error) {
	if system == "" {
		return nil, fmt.Errorf("espeak: data directory not found")
	}
	root, err := os.MkdirTemp("", "voicesvc-espeak-")
	if err != nil {
		return nil, fmt.Errorf("espeak: data dir: %w", err)
	}
	d := &dataDir{root: root, system: system}
	if err := d.populate(); err != nil {
		d.remove()
		return nil, err
	}
	return d, nil
}

func (d *dataDir) populate() error {
	if err := linkAll(d.system, d.root, "voices"); err != nil {
		return err
	}
	voices := filepath.Join(d.root, "voices")
	if err := os.Mkdir(voices, 0o755); err != nil {
		return fmt.Errorf("espeak: data dir: %w", err)
	}
	if err := linkAll(filepath.Join(d.system, "voices"), voices, "!v"); err != nil {
		return err
	}
	variants := filepath.Join(voices, "!v")
	if err := os.Mkdir(variants, 0o755); err != nil {
		return fmt.Errorf("espeak: data dir: %w", err)
	}
	return linkAll(filepath.Join(d.system, "voices", "!v"), variants, "")
}

// linkAll links every entry of src into dst except skip.
func linkAll(src, dst, skip string) error {
	entries, err := os.ReadDir(src)
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("espeak: data dir: %w", err)
	}
	for _, e := range entries {
		if e.Name() == skip {
			continue
		}
		if err := os.Symlink(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
			return fmt.Errorf("espeak: data dir: %w", err)
		}
	}
	return nil
}
