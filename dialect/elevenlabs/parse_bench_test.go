package elevenlabs

import (
	"testing"

	"voicesvc/sessions"
)

// BenchmarkWireParse: a stream-input socket's first message (text and
// flush, as the bench's and an agent's), parsed into commands.
func BenchmarkWireParse(b *testing.B) {
	msg := []byte(`{"text":"Hello there, this is a test of the streaming voice. ","flush":true}`)
	var cmds []sessions.Command
	b.ReportAllocs()
	for b.Loop() {
		w := testWire(false, true)
		var err error
		if cmds, err = w.Parse(msg, cmds[:0]); err != nil || len(cmds) != 2 {
			b.Fatal(err, cmds)
		}
	}
}
