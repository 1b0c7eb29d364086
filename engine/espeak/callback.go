package espeak

/*
#include <espeak-ng/speak_lib.h>
*/
import "C"

import "unsafe"

// espeak-ng calls back into the process with no context we control for
// every buffer, so the one synthesis in flight (espeak-ng runs one at a
// time per process) is published here. Engine.mu guards it.
var current *render

// rawEvent is the part of espeak_EVENT the engine uses.
type rawEvent struct {
	TextPosition int // 1-based character index in the synthesized text
	Length       int // characters
	AudioMs      int // ms from the start of the synthesized text
}

//export goSynthCallback
func goSynthCallback(wav *C.short, n C.int, events *C.espeak_EVENT) C.int {
	r := current
	if r == nil {
		return 0 // no synthesis of ours in flight: discard
	}
	var words []rawEvent
	for e := events; e != nil && e._type != C.espeakEVENT_LIST_TERMINATED; e = (*C.espeak_EVENT)(unsafe.Add(unsafe.Pointer(e), unsafe.Sizeof(*e))) {
		if e._type == C.espeakEVENT_WORD {
			words = append(words, rawEvent{
				TextPosition: int(e.text_position),
				Length:       int(e.length),
				AudioMs:      int(e.audio_position),
			})
		}
	}
	var pcm []int16
	if wav != nil && n > 0 {
		pcm = unsafe.Slice((*int16)(unsafe.Pointer(wav)), int(n))
	}
	if r.onAudio(pcm, words) {
		return 1
	}
	return 0
}
