// Command wstranscript drives one realtime WebSocket session against a
// running voicesvc and prints every frame in order: the transcript in
// docs/realtime.md (internal/wstranscript). Client frames are prefixed
// "C:", server frames "S:", binary frames are shown as <binary N bytes>.
//
//	go run ./scripts/wstranscript --base http://127.0.0.1:8080 --key vsk_... --voice en-us-linda
//
// The transcript in realtime.md is checked against a real server by
// go test ./e2e -run TestRealtimeTranscript, and rewritten by it with
// VOICESVC_UPDATE_DOCS=1.
package main

import (
	"flag"
	"fmt"
	"os"

	"voicesvc/internal/wstranscript"
)

func main() {
	base := flag.String("base", "http://127.0.0.1:8080", "server base URL")
	key := flag.String("key", os.Getenv("VOICESVC_KEY"), "API key (vsk_...)")
	alias := flag.String("voice", "en-us-linda", "catalog alias of the voice to speak with")
	flag.Parse()
	voice, err := wstranscript.VoiceID(*base, *key, *alias)
	if err == nil {
		err = wstranscript.Record(os.Stdout, *base, *key, voice)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "wstranscript:", err)
		os.Exit(1)
	}
}
