package espeak

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
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
// These are the variables listed here. libespeak-ng is linked statically
// (cgo.go), so they live in this executable. The static ones are not
// visible to C, so New reads their offsets from the symbol tables of
// libespeak-ng.a's objects: an object's .data and .bss are each linked as
// one block, so a static variable sits at a fixed distance from a global
// variable of the same section, whose address C knows. New records their
// values right after the first initialization, and every sentence starts
// by restoring them (vs_synth): a ~52 KB memcpy. Everything else in
// wavegen is set from the voice or re-derived at the start of each
// utterance. (Two more leaks are closed in espeak.go: espeakVOLUME is
// never set, and embedded commands are kept out of the text.)
var historyVars = []struct {
	object string // libespeak-ng.a member whose name contains this
	name   string // symbol name, before the compiler's ".N" suffix
}{
	{"wavegen", "cycle_count"},
	{"wavegen", "Flutter_ix"},
	{"wavegen", "agc"},
	{"wavegen", "rbreath"},
	{"wavegen", "resume"},
	{"wavegen", "echo_complete"},
	{"wavegen", "echo_buf"},
	{"synthesize", "phoneme_list"},
}

// Globals whose run-time address C gives (globalAddr), per object.
var historyAnchors = map[string][]string{
	"wavegen":    {"echo_buf", "embedded_default"},
	"synthesize": {"phoneme_list"},
}

// archivePaths: where the libespeak-ng.a that cgo.go links is found.
var archivePaths = []string{
	"/usr/lib/x86_64-linux-gnu/libespeak-ng.a",
	"/usr/lib/aarch64-linux-gnu/libespeak-ng.a",
	"/usr/lib/libespeak-ng.a",
	"/usr/local/lib/libespeak-ng.a",
	"/usr/lib64/libespeak-ng.a",
}

// errNoHistory: the history variables could not be located; synthesis
// still works, but a sentence's audio may then depend on what was
// rendered before it.
var errNoHistory = errors.New("espeak: libespeak-ng history state not located")

// findHistory locates historyVars and registers them with the C side.
// Call it once, right after the first espeak_Initialize.
func findHistory() error {
	var members map[string][]byte
	var err error
	for _, p := range archivePaths {
		if members, err = readArchive(p); err == nil {
			break
		}
	}
	if members == nil {
		return fmt.Errorf("%w: libespeak-ng.a: %v", errNoHistory, err)
	}
	type region struct {
		addr uintptr
		size uint64
	}
	var regions []region
	for object, anchors := range historyAnchors {
		var data []byte
		for name, b := range members {
			if strings.Contains(name, object) {
				if data != nil {
					return fmt.Errorf("%w: two %s objects", errNoHistory, object)
				}
				data = b
			}
		}
		if data == nil {
			return fmt.Errorf("%w: no %s object", errNoHistory, object)
		}
		f, err := elf.NewFile(bytes.NewReader(data))
		if err != nil {
			return fmt.Errorf("%w: %s: %v", errNoHistory, object, err)
		}
		syms, err := f.Symbols()
		if err != nil {
			return fmt.Errorf("%w: %s: %v", errNoHistory, object, err)
		}
		// base[section] = run-time address of the section's start.
		base := map[elf.SectionIndex]uintptr{}
		for _, a := range anchors {
			for _, s := range syms {
				if s.Name == a && elf.ST_BIND(s.Info) == elf.STB_GLOBAL && elf.ST_TYPE(s.Info) == elf.STT_OBJECT {
					base[s.Section] = globalAddr(a) - uintptr(s.Value)
				}
			}
		}
		if a, ok := base[elf.SectionIndex(0)]; ok || len(base) != len(anchors) {
			return fmt.Errorf("%w: %s anchors %v", errNoHistory, object, a)
		}
		// Constant tables must read the same in memory as in the archive,
		// or the link is not the one described here.
		if object == "wavegen" {
			for _, name := range []string{"embedded_default", "pk_shape2"} {
				if err := checkData(f, syms, base, name); err != nil {
					return fmt.Errorf("%w: %v", errNoHistory, err)
				}
			}
		}
		for _, v := range historyVars {
			if v.object != object {
				continue
			}
			var hit *elf.Symbol
			for i, s := range syms {
				if elf.ST_TYPE(s.Info) == elf.STT_OBJECT && (s.Name == v.name || strings.HasPrefix(s.Name, v.name+".")) {
					if hit != nil {
						return fmt.Errorf("%w: %s found twice", errNoHistory, v.name)
					}
					hit = &syms[i]
				}
			}
			if hit == nil || hit.Size == 0 {
				return fmt.Errorf("%w: %s missing", errNoHistory, v.name)
			}
			b, ok := base[hit.Section]
			if !ok {
				return fmt.Errorf("%w: no anchor for %s", errNoHistory, v.name)
			}
			regions = append(regions, region{b + uintptr(hit.Value), hit.Size})
		}
	}
	for _, r := range regions {
		if err := addHistoryRegion(r.addr, r.size); err != nil {
			return err
		}
	}
	return nil
}

// checkData compares the initial bytes of the .data variable name in the
// object with its bytes in memory, at the address derived from base.
func checkData(f *elf.File, syms []elf.Symbol, base map[elf.SectionIndex]uintptr, name string) error {
	for _, s := range syms {
		if s.Name != name {
			continue
		}
		b, err := f.Sections[s.Section].Data()
		addr, ok := base[s.Section]
		if err != nil || !ok || s.Value+s.Size > uint64(len(b)) {
			return fmt.Errorf("%s: no data", name)
		}
		if !bytes.Equal(memBytes(addr+uintptr(s.Value), s.Size), b[s.Value:s.Value+s.Size]) {
			return fmt.Errorf("%s differs from libespeak-ng.a", name)
		}
		return nil
	}
	return fmt.Errorf("%s missing", name)
}

// readArchive returns the members of a Unix ar archive by name.
func readArchive(path string) (map[string][]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if !bytes.HasPrefix(b, []byte("!<arch>\n")) {
		return nil, fmt.Errorf("%s: not an ar archive", path)
	}
	out := map[string][]byte{}
	var longNames []byte
	for off := 8; off+60 <= len(b); {
		hdr := b[off : off+60]
		size, err := strconv.Atoi(strings.TrimSpace(string(hdr[48:58])))
		if err != nil || off+60+size > len(b) {
			return nil, fmt.Errorf("%s: bad member header", path)
		}
		name := strings.TrimSpace(string(hdr[0:16]))
		data := b[off+60 : off+60+size]
		switch {
		case name == "//":
			longNames = data
		case name == "/" || name == "/SYM64/":
		case strings.HasPrefix(name, "/"):
			if n, err := strconv.Atoi(name[1:]); err == nil && n < len(longNames) {
				name = string(longNames[n:])
				if end := strings.Index(name, "/\n"); end >= 0 {
					name = name[:end]
				}
			}
			out[name] = data
		default:
			out[strings.TrimSuffix(name, "/")] = data
		}
		off += 60 + size + size%2
	}
	return out, nil
}
