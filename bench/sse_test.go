package bench

import (
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

func readAll(t testing.TB, r io.Reader) ([]sseEvent, error) {
	t.Helper()
	rd := newSSEReader(r)
	var evs []sseEvent
	for i := 0; i < 1<<20; i++ {
		ev, err := rd.Next()
		if err != nil {
			if err == io.EOF {
				return evs, nil
			}
			return evs, err
		}
		evs = append(evs, ev)
	}
	t.Fatal("parser did not terminate")
	return nil, nil
}

func TestSSEReader(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []sseEvent
	}{
		{"one event", "event: start\ndata: {\"a\":1}\n\n", []sseEvent{{"start", `{"a":1}`}}},
		{"crlf", "event: chunk\r\ndata: x\r\n\r\n", []sseEvent{{"chunk", "x"}}},
		{"lone cr", "event: chunk\rdata: x\r\r", []sseEvent{{"chunk", "x"}}},
		{"multi-line data joined", "data: a\ndata: b\n\n", []sseEvent{{"", "a\nb"}}},
		{"three data lines", "data: a\ndata: b\ndata: c\n\ndata: d\n\n", []sseEvent{{"", "a\nb\nc"}, {"", "d"}}},
		{"empty first data line", "data:\ndata: x\n\n", []sseEvent{{"", "\nx"}}},
		{"comment and unknown fields ignored", ": ping\nid: 3\nretry: 10\ndata: z\n\n", []sseEvent{{"", "z"}}},
		{"no space after colon", "event:done\ndata:{}\n\n", []sseEvent{{"done", "{}"}}},
		{"only first space stripped", "data:  two\n\n", []sseEvent{{"", " two"}}},
		{"event without data not dispatched", "event: x\n\ndata: y\n\n", []sseEvent{{"", "y"}}},
		{"partial event at EOF dropped", "data: a\n\ndata: cut", []sseEvent{{"", "a"}}},
		{"field without colon", "data\n\n", []sseEvent{{"", ""}}},
		{"empty", "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, r := range []io.Reader{strings.NewReader(tc.in), iotest.OneByteReader(strings.NewReader(tc.in))} {
				got, err := readAll(t, r)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("got %q, want %q", got, tc.want)
				}
			}
		})
	}
}

func TestSSEReaderError(t *testing.T) {
	boom := errors.New("boom")
	_, err := readAll(t, io.MultiReader(strings.NewReader("data: a\n"), iotest.ErrReader(boom)))
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
}

// FuzzSSEParse: the parser must terminate without panicking and give the same
// events however the input is split into reads (CRLF across reads included).
// Seeds live in testdata/fuzz/FuzzSSEParse.
func FuzzSSEParse(f *testing.F) {
	f.Add([]byte("event: chunk\ndata: {\"type\":\"chunk\",\"index\":0}\n\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		whole, err1 := readAll(t, strings.NewReader(string(in)))
		bytewise, err2 := readAll(t, iotest.OneByteReader(strings.NewReader(string(in))))
		if (err1 == nil) != (err2 == nil) {
			t.Fatalf("errors differ: %v vs %v", err1, err2)
		}
		if !reflect.DeepEqual(whole, bytewise) {
			t.Fatalf("split reads changed events: %q vs %q", whole, bytewise)
		}
	})
}

func TestSSEStreamConsume(t *testing.T) {
	const start = "event: start\ndata: {\"type\":\"start\",\"sample_rate\":24000,\"audio_format\":\"s16le\"}\n\n"
	chunk := func(i int) string {
		return "event: chunk\ndata: {\"type\":\"chunk\",\"index\":" + string(rune('0'+i)) + ",\"audio_b64\":\"AAAA\"}\n\n"
	}
	tests := []struct {
		name      string
		in        string
		wantErr   string
		wantGaps  int
		wantAudio float64
	}{
		{"complete with duration", start + chunk(0) + chunk(1) + "event: done\ndata: {\"type\":\"done\",\"audio_duration_s\":1.5}\n\n", "", 1, 1.5},
		{"duration from bytes", start + chunk(0) + "event: done\ndata: {\"type\":\"done\"}\n\n", "", 0, 3.0 / 2 / 24000},
		{"type from data when no event line", start + "data: {\"type\":\"chunk\",\"index\":0,\"audio_b64\":\"AAAA\"}\n\n" + "data: {\"type\":\"done\"}\n\n", "", 0, 3.0 / 2 / 24000},
		{"error event", start + "event: error\ndata: {\"type\":\"error\",\"code\":\"upstream_busy\"}\n\n", "sse:upstream_busy", 0, 0},
		{"cut stream", start + chunk(0), "sse:incomplete", 0, 3.0 / 2 / 24000},
		{"out of order", start + chunk(1), "sse:chunk_order", 0, 0},
		{"bad json", "data: nope\n\n", "sse:bad_event", 0, 0},
		{"done without audio", start + "event: done\ndata: {}\n\n", "sse:no_audio", 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := sseStream{bps: 4, rate: 8000}
			err := st.consume(newSSEReader(strings.NewReader(tc.in)), time.Now())
			if err != tc.wantErr || len(st.gaps) != tc.wantGaps {
				t.Fatalf("err %q gaps %d, want %q %d", err, len(st.gaps), tc.wantErr, tc.wantGaps)
			}
			if tc.wantAudio > 0 && !near(st.audioSeconds(), tc.wantAudio) {
				t.Errorf("audio %v, want %v", st.audioSeconds(), tc.wantAudio)
			}
		})
	}
}

func TestFastChunk(t *testing.T) {
	tests := []struct {
		data    string
		index   int
		b64     string
		wantOK  bool
		comment string
	}{
		{`{"type":"chunk","index":3,"audio_b64":"AAAA"}`, 3, "AAAA", true, "server order"},
		{`{"audio_b64":"QUJD","index": 12 ,"type":"chunk"}`, 12, "QUJD", true, "other order, spaces"},
		{`{"type":"chunk","chunk_index":1,"audio_b64":"AA=="}`, 0, "", false, "no index key"},
		{`{"type":"chunk","index":1,"audio_b64":"A\u0041"}`, 0, "", false, "escape: leave it to encoding/json"},
		{`{"type":"chunk","index":x,"audio_b64":"AA"}`, 0, "", false, "bad number"},
	}
	for _, tc := range tests {
		t.Run(tc.comment, func(t *testing.T) {
			i, b, ok := fastChunk(tc.data)
			if ok != tc.wantOK || (ok && (i != tc.index || b != tc.b64)) {
				t.Errorf("fastChunk = %d %q %v, want %d %q %v", i, b, ok, tc.index, tc.b64, tc.wantOK)
			}
		})
	}
}
