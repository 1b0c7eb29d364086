package gateway

import (
	"encoding/base64"
	"strings"
	"testing"

	"voicesvc/engine"
	"voicesvc/engine/reference"
)

// TestSSETimestamps: with timestamps true the stream carries timestamps
// events, each before the chunk holding its words' starts; every word of
// the text once, in order, where the reference engine places it, its code
// points slicing the text. Without the field, none.
func TestSSETimestamps(t *testing.T) {
	ss := newSynthServer(t, synthOpts{})
	text := "Hello there, Dr. Smith. नमस्ते दुनिया! Paid $5 today."
	for _, rate := range []int{8000, 24000, 48000} {
		resp := ss.post("/voices/"+ss.voice+"/stream", ss.key, map[string]any{
			"text": text, "timestamps": true, "output_format": "s16le", "sample_rate": rate})
		evs, err := readSSE(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%d %v", resp.StatusCode, err)
		}
		var words []map[string]any
		audio := 0.0
		for _, ev := range evs {
			switch ev.name {
			case "timestamps":
				if ev.data["type"] != "timestamps" {
					t.Fatalf("timestamps event %v", ev.data)
				}
				for _, w := range ev.data["words"].([]any) {
					w := w.(map[string]any)
					if w["start_s"].(float64)+1e-4 < audio {
						t.Fatalf("word %v after %.6f s of audio", w, audio)
					}
					words = append(words, w)
				}
			case "chunk":
				pcm, _ := base64.StdEncoding.DecodeString(ev.data["audio_b64"].(string))
				audio += float64(len(pcm)/2) / float64(rate)
			}
		}
		want := engine.Words(text)
		runes := []rune(text)
		if len(words) != len(want) {
			t.Fatalf("rate %d: %d words, want %d", rate, len(words), len(want))
		}
		sents := engine.Sentences(text)
		for i, w := range words {
			cs, ce := int(w["char_start"].(float64)), int(w["char_end"].(float64))
			if w["word"] != want[i].Text || string(runes[cs:ce]) != want[i].Text {
				t.Fatalf("word %d %v, want %q", i, w, want[i].Text)
			}
			// 60 ms per non-space character, sentences back to back.
			chars := 0
			for _, s := range sents {
				if s.Start >= want[i].Start {
					break
				}
				end := min(s.End, want[i].Start)
				chars += len([]rune(strings.Join(strings.Fields(text[s.Start:end]), "")))
			}
			at := float64(chars) * reference.PerCharacter.Seconds()
			if d := w["start_s"].(float64) - at; d > 2.0/float64(rate) || d < -2.0/float64(rate) {
				t.Fatalf("rate %d word %v, want start %.6f", rate, w, at)
			}
			if i > 0 && words[i-1]["end_s"].(float64) > w["start_s"].(float64)+1e-6 {
				t.Fatalf("word %d ends after the next starts", i-1)
			}
		}
	}
	resp := ss.post("/voices/"+ss.voice+"/stream", ss.key, map[string]any{"text": "No words."})
	evs, _ := readSSE(resp.Body)
	resp.Body.Close()
	for _, ev := range evs {
		if ev.name == "timestamps" {
			t.Fatal("timestamps without asking")
		}
	}
	if r := ss.post("/voices/"+ss.voice+"/stream", ss.key, map[string]any{"text": "x", "timestamps": "yes"}); r.StatusCode != 400 {
		t.Fatalf("timestamps \"yes\": %d", r.StatusCode)
	}
}
