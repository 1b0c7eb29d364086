// Package layout finds, in libespeak-ng.a, where the variables that carry
// one synthesis's state into the next sit relative to global variables
// whose addresses C knows (engine/espeak/history.go says why). It is pure
// Go, without cgo, so that the build can run it (cmd/espeak-layout) on the
// archive it links and embed the result, and the running binary needs no
// archive.
package layout

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// Vars are the history variables (engine/espeak/history.go).
var Vars = []struct {
	Object string // libespeak-ng.a member whose name contains this
	Name   string // symbol name, before the compiler's ".N" suffix
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

// Anchors are the globals whose run-time address C gives, per object.
var Anchors = map[string][]string{
	"wavegen":    {"echo_buf", "embedded_default"},
	"synthesize": {"phoneme_list"},
}

// checked are constant tables whose bytes in memory must be those of the
// archive, or the link is not the one the layout describes.
var checked = map[string][]string{"wavegen": {"embedded_default", "pk_shape2"}}

// Paths are where a libespeak-ng.a is looked for when the C compiler does
// not say (Find).
var Paths = []string{
	"/usr/lib/x86_64-linux-gnu/libespeak-ng.a",
	"/usr/lib/aarch64-linux-gnu/libespeak-ng.a",
	"/usr/lib/libespeak-ng.a",
	"/usr/local/lib/libespeak-ng.a",
	"/usr/lib64/libespeak-ng.a",
}

// Layout is where the history variables are in one libespeak-ng.a.
type Layout struct {
	Archive string   `json:"archive_sha256"` // of the archive it was read from
	Regions []Region `json:"regions"`
	Checks  []Check  `json:"checks"`
}

// Region is a history variable: Size bytes at the address of Anchor plus
// Offset (the same section of the same object, linked as one block).
type Region struct {
	Name   string `json:"name"`
	Anchor string `json:"anchor"`
	Offset int64  `json:"offset"`
	Size   uint64 `json:"size"`
}

// Check is a constant table: at Anchor plus Offset, memory must hold Data.
type Check struct {
	Name   string `json:"name"`
	Anchor string `json:"anchor"`
	Offset int64  `json:"offset"`
	Data   []byte `json:"data"`
}

// MaxOffset bounds an offset from an anchor: a layout meant for another
// link is refused by its checks, and never reads far from its anchor.
const MaxOffset = 1 << 20

// Find returns the libespeak-ng.a the C compiler links with
// -l:libespeak-ng.a (cc -print-file-name), else the first of Paths that
// exists.
func Find() (string, error) {
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	if out, err := exec.Command(cc, "-print-file-name=libespeak-ng.a").Output(); err == nil {
		if p := strings.TrimSpace(string(out)); strings.Contains(p, "/") {
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
		}
	}
	for _, p := range Paths {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("libespeak-ng.a not found")
}

// Compute reads the layout from the archive at path.
func Compute(path string) (Layout, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Layout{}, err
	}
	sum := sha256.Sum256(b)
	members, err := readArchive(path, b)
	if err != nil {
		return Layout{}, err
	}
	l := Layout{Archive: hex.EncodeToString(sum[:])}
	for _, object := range []string{"wavegen", "synthesize"} {
		if err := l.addObject(members, object); err != nil {
			return Layout{}, fmt.Errorf("%s: %w", path, err)
		}
	}
	return l, nil
}

func (l *Layout) addObject(members map[string][]byte, object string) error {
	var data []byte
	for name, b := range members {
		if strings.Contains(name, object) {
			if data != nil {
				return fmt.Errorf("two %s objects", object)
			}
			data = b
		}
	}
	if data == nil {
		return fmt.Errorf("no %s object", object)
	}
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("%s: %v", object, err)
	}
	syms, err := f.Symbols()
	if err != nil {
		return fmt.Errorf("%s: %v", object, err)
	}
	// anchor[section] = the anchor of that section and its value there.
	type anchor struct {
		name  string
		value uint64
	}
	anchors := map[elf.SectionIndex]anchor{}
	for _, a := range Anchors[object] {
		for _, s := range syms {
			if s.Name == a && elf.ST_BIND(s.Info) == elf.STB_GLOBAL && elf.ST_TYPE(s.Info) == elf.STT_OBJECT {
				anchors[s.Section] = anchor{a, s.Value}
			}
		}
	}
	if _, ok := anchors[elf.SectionIndex(0)]; ok || len(anchors) != len(Anchors[object]) {
		return fmt.Errorf("%s anchors not found", object)
	}
	at := func(s elf.Symbol) (anchor, int64, error) {
		a, ok := anchors[s.Section]
		if !ok {
			return a, 0, fmt.Errorf("no anchor for %s", s.Name)
		}
		off := int64(s.Value) - int64(a.value)
		if off < -MaxOffset || off > MaxOffset {
			return a, 0, fmt.Errorf("%s is %d bytes from %s", s.Name, off, a.name)
		}
		return a, off, nil
	}
	for _, name := range checked[object] {
		var hit *elf.Symbol
		for i, s := range syms {
			if s.Name == name {
				hit = &syms[i]
			}
		}
		if hit == nil {
			return fmt.Errorf("%s missing", name)
		}
		b, err := f.Sections[hit.Section].Data()
		if err != nil || hit.Value+hit.Size > uint64(len(b)) {
			return fmt.Errorf("%s: no data", name)
		}
		a, off, err := at(*hit)
		if err != nil {
			return err
		}
		l.Checks = append(l.Checks, Check{Name: name, Anchor: a.name, Offset: off,
			Data: append([]byte(nil), b[hit.Value:hit.Value+hit.Size]...)})
	}
	for _, v := range Vars {
		if v.Object != object {
			continue
		}
		var hit *elf.Symbol
		for i, s := range syms {
			if elf.ST_TYPE(s.Info) == elf.STT_OBJECT && (s.Name == v.Name || strings.HasPrefix(s.Name, v.Name+".")) {
				if hit != nil {
					return fmt.Errorf("%s found twice", v.Name)
				}
				hit = &syms[i]
			}
		}
		if hit == nil || hit.Size == 0 {
			return fmt.Errorf("%s missing", v.Name)
		}
		a, off, err := at(*hit)
		if err != nil {
			return err
		}
		l.Regions = append(l.Regions, Region{Name: v.Name, Anchor: a.name, Offset: off, Size: hit.Size})
	}
	return nil
}

// readArchive returns the members of a Unix ar archive by name.
func readArchive(path string, b []byte) (map[string][]byte, error) {
	if !bytes.HasPrefix(b, []byte("!<arch>\n")) {
		return nil, fmt.Errorf("%s: not an ar archive", path)
	}
	out := map[string][]byte{}
	var longNames []byte
	for off := 8; off+60 <= len(b); {
		hdr := b[off : off+60]
		size, err := strconv.Atoi(strings.TrimSpace(string(hdr[48:58])))
		if err != nil || size < 0 || off+60+size > len(b) {
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
