package main

import (
	"os"
	"path/filepath"
	"testing"

	"voicesvc/engine/espeak/layout"
)

// The layout of this machine's libespeak-ng.a has every history variable,
// and the file written for it is the one the espeak package embeds (when
// that archive's file is there: make build writes it).
func TestLayoutOfLinkedArchive(t *testing.T) {
	archive, err := layout.Find()
	if err != nil {
		t.Skip(err)
	}
	l, err := layout.Compute(archive)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Regions) != len(layout.Vars) || len(l.Checks) != 2 || len(l.Archive) != 64 {
		t.Fatalf("layout of %s: %+v", archive, l)
	}
	dir := t.TempDir()
	if err := run(archive, dir); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, l.Archive+".json"))
	if err != nil {
		t.Fatal(err)
	}
	embedded, err := os.ReadFile(filepath.Join("..", "..", "engine", "espeak", "layouts", l.Archive+".json"))
	if err != nil {
		t.Skipf("%s's layout is not in engine/espeak/layouts: %v", archive, err)
	}
	if string(got) != string(embedded) {
		t.Errorf("engine/espeak/layouts/%s.json differs from what espeak-layout writes now", l.Archive)
	}
}
