package espeak

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"voicesvc/engine/espeak/layout"
)

// espeak-ng keeps state from one synthesis to the next that no API call
// resets (espeak_Terminate and espeak_Initialize included), so the same
// sentence with the same voice came out a few to thousands of samples
// different depending on what had been rendered before it:
//
//   - wavegen.c's cycle_count, a count of every glottal cycle ever
//     rendered: "roughness" attenuates the cycles where cycle_count is a
//     multiple of 2, 3 or 4, so its phase at the start of a sentence
//     changes the samples;
//   - synthesize.c's phoneme_list: Generate and the phoneme programs read
//     the two entries after the end of the current clause, which hold
//     whatever an earlier, longer clause left there (it changes the
//     final pause by up to ~50 ms);
//   - wavegen.c's echo_buf (the echo of the last sentence), Flutter_ix
//     (flutter phase), agc (gain control after a clipped sample), rbreath
//     (breath resonator memory), and the resume flags WavegenFill2 leaves
//     set when a synthesis is aborted mid-command.
//
// These are the variables of layout.Vars. libespeak-ng is linked
// statically (cgo.go), so they live in this executable. The static ones are
// not visible to C, but an object's .data and .bss are each linked as one
// block, so a static variable sits at a fixed distance from a global
// variable of the same section, whose address C knows (layout.Anchors).
// Those distances come from the symbol tables of libespeak-ng.a's objects
// (package layout): at build time, from the archive the build links (make
// build and the Dockerfile run cmd/espeak-layout, which writes
// layouts/<archive sha256>.json, embedded here), else at run time from the
// archive on this machine. A layout is used only when constant tables read
// the same in memory as in the archive it came from. New records the
// variables' values right after the first initialization, and every
// sentence starts by restoring them (vs_synth): a ~52 KB memcpy.
// Everything else in wavegen is set from the voice or re-derived at the
// start of each utterance. (Two more leaks are closed in espeak.go:
// espeakVOLUME is never set, and embedded commands are kept out of the
// text.)

//go:embed layouts
var layoutFiles embed.FS

// archiveEnv, when set, is the only libespeak-ng.a read at run time (when
// no embedded layout fits this binary) instead of layout.Paths.
const archiveEnv = "VOICESVC_ESPEAK_ARCHIVE"

// useEmbeddedLayouts is false only in a test that reads the archive alone.
var useEmbeddedLayouts = true

// errNoHistory: the history variables could not be located; synthesis
// still works, but a sentence's audio may then depend on what was
// rendered before it.
var errNoHistory = errors.New("espeak: libespeak-ng history state not located")

// findHistory locates the history variables and registers them with the C
// side: from an embedded layout that fits this binary, else from the
// archive. Call it once, right after the first espeak_Initialize.
func findHistory() error {
	var reasons []string
	var embedded []layout.Layout
	if useEmbeddedLayouts {
		embedded = embeddedLayouts(&reasons)
	}
	for _, l := range embedded {
		err := applyLayout(l)
		if err == nil {
			return nil
		}
		reasons = append(reasons, fmt.Sprintf("embedded layout %.12s: %v", l.Archive, err))
	}
	paths := layout.Paths
	if p := os.Getenv(archiveEnv); p != "" {
		paths = []string{p}
	}
	var l layout.Layout
	err := fmt.Errorf("no libespeak-ng.a in %v", paths)
	for _, p := range paths {
		if _, serr := os.Stat(p); serr != nil && len(paths) > 1 {
			continue
		}
		if l, err = layout.Compute(p); err == nil {
			break
		}
	}
	if err == nil {
		if err = applyLayout(l); err == nil {
			return nil
		}
	}
	reasons = append(reasons, "libespeak-ng.a: "+err.Error())
	return fmt.Errorf("%w: %s", errNoHistory, strings.Join(reasons, "; "))
}

// embeddedLayouts decodes layouts/*.json; a file that does not decode is
// a reason, not a layout.
func embeddedLayouts(reasons *[]string) []layout.Layout {
	var out []layout.Layout
	entries, _ := fs.ReadDir(layoutFiles, "layouts")
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := layoutFiles.ReadFile("layouts/" + e.Name())
		var l layout.Layout
		if err == nil {
			err = json.Unmarshal(b, &l)
		}
		if err != nil {
			*reasons = append(*reasons, fmt.Sprintf("layouts/%s: %v", e.Name(), err))
			continue
		}
		out = append(out, l)
	}
	return out
}

// applyLayout checks l against this binary's memory (its constant tables
// must read as in the archive it came from) and only then registers its
// regions.
func applyLayout(l layout.Layout) error {
	addr := func(anchor string, off int64) (uintptr, error) {
		a := globalAddr(anchor)
		if a == 0 || off < -layout.MaxOffset || off > layout.MaxOffset {
			return 0, fmt.Errorf("bad anchor %s%+d", anchor, off)
		}
		return uintptr(int64(a) + off), nil
	}
	if len(l.Checks) == 0 || len(l.Regions) != len(layout.Vars) {
		return errors.New("incomplete layout")
	}
	for _, c := range l.Checks {
		a, err := addr(c.Anchor, c.Offset)
		if err != nil {
			return err
		}
		if !bytes.Equal(memBytes(a, uint64(len(c.Data))), c.Data) {
			return fmt.Errorf("%s differs from libespeak-ng.a", c.Name)
		}
	}
	regions := make([]uintptr, len(l.Regions))
	for i, r := range l.Regions {
		a, err := addr(r.Anchor, r.Offset)
		if err != nil {
			return err
		}
		regions[i] = a
	}
	for i, r := range l.Regions {
		if err := addHistoryRegion(regions[i], r.Size); err != nil {
			return err
		}
	}
	return nil
}
