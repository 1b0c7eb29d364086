package espeak

/*
// libespeak-ng is linked statically (with the two libraries it needs) so
// that its private synthesis state is part of this executable, where
// history.go finds it to put it back before every sentence. libsonic also
// time-stretches our own audio (stretch.go).
#cgo LDFLAGS: -l:libespeak-ng.a -l:libpcaudio.so.0 -l:libsonic.so.0 -lm
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <espeak-ng/speak_lib.h>
#include <espeak-ng/espeak_ng.h>

// Defined in callback.go (exported from Go).
extern int goSynthCallback(short *wav, int n, espeak_EVENT *events);

// vs_data_path resolves espeak-ng's own data directory (environment or
// compiled-in default) before initialization, so we can mirror it.
static const char *vs_data_path(void) {
	const char *path = NULL;
	espeak_ng_InitializePath(NULL);
	espeak_Info(&path);
	return path;
}

// vs_pad_pattern fills vs_synth's pad (see there).
static char vs_pad_pattern[64 << 10];

static void vs_pad_init(void) {
	for (size_t i = 0; i < sizeof vs_pad_pattern; i++)
		vs_pad_pattern[i] = (i & 1) ? 0 : ' ';
}

static int vs_init(const char *path, int buflen_ms) {
	vs_pad_init();
	int rate = espeak_Initialize(AUDIO_OUTPUT_SYNCHRONOUS, buflen_ms, path,
		espeakINITIALIZE_DONT_EXIT);
	if (rate > 0)
		espeak_SetSynthCallback(goSynthCallback);
	return rate;
}

// History regions: variables inside libespeak-ng that carry what one
// synthesis did into the next (history.go lists and finds them), with
// their values right after espeak_Initialize.
#define VS_MAX_REGIONS 16
static struct {
	unsigned char *addr;
	size_t size;
	unsigned char *init;
} vs_regions[VS_MAX_REGIONS];
static int vs_nregions;

// Global variables of libespeak-ng (not in its headers): their run-time
// addresses anchor the static variables defined next to them.
extern char echo_buf[], phoneme_list[], embedded_default[];
static void *vs_global(int which) {
	switch (which) {
	case 0: return echo_buf;
	case 1: return phoneme_list;
	case 2: return embedded_default;
	}
	return NULL;
}
static void *vs_ptr(uintptr_t addr) { return (void *)addr; }

static int vs_add_region(uintptr_t addr, size_t size) {
	unsigned char *init;
	if (vs_nregions == VS_MAX_REGIONS || (init = malloc(size)) == NULL)
		return -1;
	memcpy(init, (void *)addr, size);
	vs_regions[vs_nregions].addr = (unsigned char *)addr;
	vs_regions[vs_nregions].size = size;
	vs_regions[vs_nregions].init = init;
	vs_nregions++;
	return 0;
}

// vs_synth renders one sentence from the state espeak-ng had when it was
// initialized: the history regions are restored and rand() (breath and
// noise) is reseeded, so a sentence's audio does not depend on whatever
// was rendered before it.
//
// The pad: espeak-ng 1.51 can read a clause buffer of its own stack frame
// past its end: MatchRule's post-context rules scan forward with utf8_in
// until a space (and other scans until a NUL), through whatever lies above
// its frames. That only faults when its frames sit right under the top of
// the stack, as they do when a cgo call starts near the top of a thread's
// stack (SEGV at the top page, seen in utf8_in under MatchRule). A pad in
// this frame, above espeak-ng's frames, ends every such scan inside mapped
// memory: it alternates spaces and NULs, so a scan for either stops within
// two bytes. (A pad of zeros alone let a space-seeking scan run through all
// 64 KiB of it.)
static int vs_synth(const char *text) {
	volatile char pad[sizeof vs_pad_pattern];
	memcpy((char *)pad, vs_pad_pattern, sizeof pad);
	for (int i = 0; i < vs_nregions; i++)
		memcpy(vs_regions[i].addr, vs_regions[i].init, vs_regions[i].size);
	srand(1);
	int rc = espeak_Synth(text, strlen(text) + 1, 0, POS_CHARACTER, 0,
		espeakCHARS_UTF8 | espeakENDPAUSE, NULL, NULL);
	(void)pad[0]; // keeps the pad in this frame until espeak-ng returns
	return rc;
}

// vs_next_language walks the voice's languages field: a priority byte, a
// NUL-terminated name, repeated, ending with a zero priority.
static const char *vs_next_language(const char *p, int *priority) {
	if (p == NULL || *p == 0)
		return NULL;
	*priority = (unsigned char)p[0];
	return p + 1;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"
)

// bufferMs is espeak-ng's output buffer: small, so the first audio reaches
// the caller while the rest of the sentence is still being rendered.
const bufferMs = 20

// Error is an espeak_ERROR status code.
type Error int

func (e Error) Error() string {
	switch e {
	case C.EE_INTERNAL_ERROR:
		return "espeak: internal error"
	case C.EE_BUFFER_FULL:
		return "espeak: buffer full"
	case C.EE_NOT_FOUND:
		return "espeak: not found"
	}
	return fmt.Sprintf("espeak: error %d", int(e))
}

func systemDataPath() string {
	return C.GoString(C.vs_data_path())
}

func initialize(path string) (int, error) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	rate := int(C.vs_init(cpath, bufferMs))
	if rate <= 0 {
		return 0, errors.New("espeak: initialization failed")
	}
	return rate, nil
}

func terminate() { C.espeak_Terminate() }

// globalAddr is the run-time address of a global variable of
// libespeak-ng (history.go).
func globalAddr(name string) uintptr {
	which := map[string]C.int{"echo_buf": 0, "phoneme_list": 1, "embedded_default": 2}
	if w, ok := which[name]; ok {
		return uintptr(C.vs_global(w))
	}
	return 0
}

// memBytes copies n bytes at addr, an address inside libespeak-ng.
func memBytes(addr uintptr, n uint64) []byte {
	return C.GoBytes(C.vs_ptr(C.uintptr_t(addr)), C.int(n))
}

// addHistoryRegion records size bytes at addr as history to restore
// before every sentence, with their current (just initialized) value.
func addHistoryRegion(addr uintptr, size uint64) error {
	if C.vs_add_region(C.uintptr_t(addr), C.size_t(size)) != 0 {
		return errors.New("espeak: too many history regions")
	}
	return nil
}

func setVoice(name string) error {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	if rc := C.espeak_SetVoiceByName(cname); rc != C.EE_OK {
		return fmt.Errorf("espeak: voice %q: %w", name, Error(rc))
	}
	return nil
}

func setParameter(p C.espeak_PARAMETER, value int) error {
	if rc := C.espeak_SetParameter(p, C.int(value), 0); rc != C.EE_OK {
		return fmt.Errorf("espeak: parameter %d: %w", int(p), Error(rc))
	}
	return nil
}

// synth renders text through the callback; it returns when espeak-ng has
// finished or the callback aborted.
func synth(text string) error {
	ctext := C.CString(text)
	defer C.free(unsafe.Pointer(ctext))
	if rc := C.vs_synth(ctext); rc != C.EE_OK {
		return Error(rc)
	}
	return nil
}

// cancelPending drops what an aborted synthesis left queued in espeak-ng,
// which would otherwise be spoken at the start of a later one.
func cancelPending() { C.espeak_Cancel() }

// espeakVoice is one entry of espeak_ListVoices.
type espeakVoice struct {
	Name       string
	Identifier string // path under espeak-ng-data/voices or lang
	Gender     int    // 0 none, 1 male, 2 female
	Languages  []espeakLanguage
}

type espeakLanguage struct {
	Tag      string // espeak's spelling, e.g. "en-gb-x-rp"
	Priority int    // lower is preferred
}

func listVoices() []espeakVoice {
	list := C.espeak_ListVoices(nil)
	var out []espeakVoice
	for p := list; *p != nil; p = (**C.espeak_VOICE)(unsafe.Add(unsafe.Pointer(p), unsafe.Sizeof(*p))) {
		v := *p
		ev := espeakVoice{
			Name:       C.GoString(v.name),
			Identifier: C.GoString(v.identifier),
			Gender:     int(v.gender),
		}
		var prio C.int
		for l := C.vs_next_language(v.languages, &prio); l != nil; {
			tag := C.GoString(l)
			ev.Languages = append(ev.Languages, espeakLanguage{Tag: tag, Priority: int(prio)})
			l = C.vs_next_language((*C.char)(unsafe.Add(unsafe.Pointer(l), len(tag)+1)), &prio)
		}
		out = append(out, ev)
	}
	return out
}
