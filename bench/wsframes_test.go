package bench

import (
	"strings"
	"testing"
)

// frame is a crafted WebSocket frame: text JSON, or a binary frame of n bytes.
type frame struct {
	text string
	bin  int
}

func TestPairChecker(t *testing.T) {
	chunk := func(ctx string, n int) frame {
		return frame{text: `{"type":"audio_chunk","context_id":"` + ctx + `","sentence_index":0,"chunk_index":0,"audio_duration_s":0.1,"byte_length":` + itoa(n) + `}`}
	}
	bin := func(n int) frame { return frame{bin: n, text: ""} }
	started := frame{text: `{"type":"task_started","context_id":"a","sample_rate":24000,"audio_format":"s16le"}`}
	done := frame{text: `{"type":"task_done","context_id":"a","num_sentences":1,"total_audio_duration_s":0.2}`}
	tests := []struct {
		name    string
		frames  []frame
		wantErr string // substring; "" = valid
		wantCtx []string
	}{
		{"valid interleaved contexts", []frame{started, chunk("a", 4), bin(4), chunk("b", 6), bin(6), chunk("a", 0), bin(0), done}, "", []string{"a", "b", "a"}},
		{"length mismatch", []frame{chunk("a", 4), bin(5)}, "said byte_length 4", nil},
		{"binary without audio_chunk", []frame{started, bin(4)}, "without a preceding audio_chunk", nil},
		{"text where binary due", []frame{chunk("a", 4), done}, "binary frame of audio_chunk", nil},
		{"two chunks back to back", []frame{chunk("a", 4), chunk("a", 4)}, "binary frame of audio_chunk", nil},
		{"not json", []frame{{text: "hello"}}, "not JSON", nil},
		{"negative length", []frame{chunk("a", -1)}, "negative", nil},
		{"unknown types pass", []frame{{text: `{"type":"future_thing"}`}}, "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var pc pairChecker
			var err error
			var ctxs []string
			for _, f := range tc.frames {
				if f.text != "" {
					_, err = pc.Text([]byte(f.text))
				} else {
					var m wsMsg
					m, err = pc.Binary(f.bin)
					if err == nil {
						ctxs = append(ctxs, m.ContextID)
					}
				}
				if err != nil {
					break
				}
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("err %v, want containing %q", err, tc.wantErr)
			}
			if tc.wantErr == "" && strings.Join(ctxs, ",") != strings.Join(tc.wantCtx, ",") {
				t.Errorf("binary frames attributed to %v, want %v", ctxs, tc.wantCtx)
			}
		})
	}
}

func itoa(n int) string {
	if n < 0 {
		return "-" + itoa(-n)
	}
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}
