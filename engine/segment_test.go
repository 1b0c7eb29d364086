package engine

import (
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func texts(spans []Span) []string {
	out := []string{}
	for _, s := range spans {
		out = append(out, s.Text)
	}
	return out
}

var sentenceCases = []struct {
	name string
	in   string
	want []string
}{
	// Latin
	{"empty", "", nil},
	{"blank", "  \n\t ", nil},
	{"one no terminator", "Hello world", []string{"Hello world"}},
	{"one", "Hello world.", []string{"Hello world."}},
	{"two", "Hello. World.", []string{"Hello.", "World."}},
	{"question exclaim", "Really? Yes! Fine.", []string{"Really?", "Yes!", "Fine."}},
	{"interrobang", "What?! No.", []string{"What?!", "No."}},
	{"ellipsis ascii", "Wait... Go on.", []string{"Wait...", "Go on."}},
	{"ellipsis char", "Wait… Go on.", []string{"Wait…", "Go on."}},
	{"no space after", "Hi!Bob is here.", []string{"Hi!Bob is here."}},
	{"dr", "Dr. Smith is in. He waits.", []string{"Dr. Smith is in.", "He waits."}},
	{"mr mrs", "Mr. and Mrs. Jones came.", []string{"Mr. and Mrs. Jones came."}},
	{"eg ie", "Fruit, e.g. apples, i.e. food. Next.", []string{"Fruit, e.g. apples, i.e. food.", "Next."}},
	{"us mid", "The U.S. economy grew.", []string{"The U.S. economy grew."}},
	{"us end", "I live in the U.S. It is big.", []string{"I live in the U.S.", "It is big."}},
	{"us final", "Made in the U.S.", []string{"Made in the U.S."}},
	{"etc lower", "Cats, dogs, etc. are pets.", []string{"Cats, dogs, etc. are pets."}},
	{"etc upper", "Cats, dogs, etc. Then birds.", []string{"Cats, dogs, etc.", "Then birds."}},
	{"decimal", "Pi is 3.14 today. Yes.", []string{"Pi is 3.14 today.", "Yes."}},
	{"version", "Use v1.2.3 now.", []string{"Use v1.2.3 now."}},
	{"number end", "I have 3. You have 4.", []string{"I have 3.", "You have 4."}},
	{"initial", "J. R. Tolkien wrote. Read him.", []string{"J. R. Tolkien wrote.", "Read him."}},
	{"list", "1. Buy milk\n2. Buy eggs", []string{"1. Buy milk", "2. Buy eggs"}},
	{"list indented", "Steps:\n  1. Open it.\n  2. Close it.", []string{"Steps:", "1. Open it.", "2. Close it."}},
	{"list inline", "Steps: 1. Open it. 2. Close it.", []string{"Steps: 1. Open it.", "2. Close it."}},
	{"quote after", `He said "Stop." Then left.`, []string{`He said "Stop."`, "Then left."}},
	{"curly quote", "She asked “Why?” He shrugged.", []string{"She asked “Why?”", "He shrugged."}},
	{"bracket after", "It ended (finally.) We left.", []string{"It ended (finally.)", "We left."}},
	{"newline", "First line\nSecond line", []string{"First line", "Second line"}},
	{"paragraph", "One.\n\nTwo.", []string{"One.", "Two."}},
	{"crlf", "One\r\nTwo", []string{"One", "Two"}},
	{"punct only dropped", "Hello. ... !", []string{"Hello."}},
	{"spaces trimmed", "   Hi.   Bye.  ", []string{"Hi.", "Bye."}},
	{"spanish", "¿Qué tal? Bien.", []string{"¿Qué tal?", "Bien."}},
	{"german abbr", "Prof. Müller kam. Gut.", []string{"Prof. Müller kam.", "Gut."}},
	{"url like", "Go to example.com now. Ok.", []string{"Go to example.com now.", "Ok."}},
	// Devanagari
	{"danda", "नमस्ते। आप कैसे हैं।", []string{"नमस्ते।", "आप कैसे हैं।"}},
	{"danda no space", "नमस्ते।आप कैसे हैं।", []string{"नमस्ते।", "आप कैसे हैं।"}},
	{"double danda", "श्लोक एक॥ श्लोक दो॥", []string{"श्लोक एक॥", "श्लोक दो॥"}},
	{"hindi question", "आप कौन हैं? मैं राम हूँ।", []string{"आप कौन हैं?", "मैं राम हूँ।"}},
	{"hindi mixed", "मैंने Dr. Rao से बात की। ठीक है।", []string{"मैंने Dr. Rao से बात की।", "ठीक है।"}},
	{"hindi unterminated", "यह एक वाक्य है", []string{"यह एक वाक्य है"}},
	{"hindi newline", "पहला\nदूसरा", []string{"पहला", "दूसरा"}},
	// CJK
	{"chinese", "你好。今天天气很好！你呢？", []string{"你好。", "今天天气很好！", "你呢？"}},
	{"japanese quote", "「行こう。」と彼は言った。", []string{"「行こう。」", "と彼は言った。"}},
	{"chinese decimal", "价格是3.5元。好的。", []string{"价格是3.5元。", "好的。"}},
	{"cjk unterminated", "你好", []string{"你好"}},
	{"cjk mixed latin", "我说 OK. 你好。", []string{"我说 OK.", "你好。"}},
}

func TestSentences(t *testing.T) {
	for _, tc := range sentenceCases {
		t.Run(tc.name, func(t *testing.T) {
			got := Sentences(tc.in)
			if w := tc.want; !reflect.DeepEqual(texts(got), append([]string{}, w...)) {
				t.Errorf("Sentences(%q)\n got %q\nwant %q", tc.in, texts(got), w)
			}
			for _, s := range got {
				if tc.in[s.Start:s.End] != s.Text {
					t.Errorf("span %+v does not match the original", s)
				}
			}
		})
	}
}

func TestCutComplete(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
		tail string
	}{
		{"nothing", "Hello wor", nil, "Hello wor"},
		{"terminator at end", "Hello.", nil, "Hello."},
		{"terminator space", "Hello. ", []string{"Hello."}, ""},
		{"two and tail", "One. Two! Thr", []string{"One.", "Two!"}, "Thr"},
		{"abbr at end", "Ask Dr. ", nil, "Ask Dr. "},
		{"abbr then name", "Ask Dr. Who. Then", []string{"Ask Dr. Who."}, "Then"},
		{"number at end", "It costs 3.", nil, "It costs 3."},
		{"decimal pending", "It costs 3.1", nil, "It costs 3.1"},
		{"maybe abbr at end", "Dogs, etc. ", nil, "Dogs, etc. "},
		{"maybe abbr decided", "Dogs, etc. The", []string{"Dogs, etc."}, "The"},
		{"newline", "Line one\nLine", []string{"Line one"}, "Line"},
		{"quote pending", `He said "Stop.`, nil, `He said "Stop.`},
		{"quote closed", `He said "Stop." `, []string{`He said "Stop."`}, ""},
		{"danda at end", "नमस्ते।", nil, "नमस्ते।"},
		{"danda followed", "नमस्ते।आप", []string{"नमस्ते।"}, "आप"},
		{"cjk followed", "你好。今天", []string{"你好。"}, "今天"},
		{"leading space", "  Hi. there", []string{"Hi."}, "there"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, rest := CutComplete(tc.in)
			if !reflect.DeepEqual(texts(got), append([]string{}, tc.want...)) || tc.in[rest:] != tc.tail {
				t.Errorf("CutComplete(%q) = %q, tail %q; want %q, tail %q",
					tc.in, texts(got), tc.in[rest:], tc.want, tc.tail)
			}
		})
	}
}

// TestCutCompleteAgrees feeds each case in pieces, as a realtime client
// would, and checks the result equals segmenting the whole text.
func TestCutCompleteAgrees(t *testing.T) {
	for _, tc := range sentenceCases {
		for _, step := range []int{1, 3, 7} {
			if got := feed(tc.in, step); !reflect.DeepEqual(got, texts(Sentences(tc.in))) {
				t.Errorf("%s step %d: incremental %q, whole %q", tc.name, step, got, texts(Sentences(tc.in)))
			}
		}
	}
}

// feed appends text step bytes at a time (never splitting a rune), cuts
// complete sentences as it goes and segments the tail at the end.
func feed(text string, step int) []string {
	out := []string{}
	buf := ""
	for i := 0; i < len(text); {
		j := min(i+step, len(text))
		for j < len(text) && !utf8.RuneStart(text[j]) {
			j++
		}
		buf += text[i:j]
		i = j
		spans, rest := CutComplete(buf)
		out = append(out, texts(spans)...)
		buf = buf[rest:]
	}
	return append(out, texts(Sentences(buf))...)
}

func TestWords(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"Hello, world!", []string{"Hello", "world"}},
		{`"Quoted" (words) -- here.`, []string{"Quoted", "words", "here"}},
		{"नमस्ते दुनिया।", []string{"नमस्ते", "दुनिया"}},
		{"3.14 is pi", []string{"3.14", "is", "pi"}},
	}
	for _, tc := range tests {
		if got := texts(Words(tc.in)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Words(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func FuzzSentences(f *testing.F) {
	for _, tc := range sentenceCases {
		f.Add(tc.in)
	}
	f.Add("a.\"\n.।。!?…")
	f.Fuzz(func(t *testing.T, text string) {
		prev := 0
		for _, s := range Sentences(text) {
			if s.Start < prev || s.End <= s.Start || s.End > len(text) || text[s.Start:s.End] != s.Text {
				t.Fatalf("bad span %+v (prev end %d) in %q", s, prev, text)
			}
			if strings.TrimSpace(s.Text) != s.Text {
				t.Fatalf("untrimmed span %q", s.Text)
			}
			prev = s.End
			// The pool re-segments each sentence inside its worker: a
			// sentence must stay one sentence.
			if again := Sentences(s.Text); len(again) != 1 || again[0].Text != s.Text {
				t.Fatalf("sentence %q re-segments into %q", s.Text, texts(again))
			}
		}
		spans, rest := CutComplete(text)
		if rest < 0 || rest > len(text) {
			t.Fatalf("rest %d out of range", rest)
		}
		for _, s := range spans {
			if s.End > rest {
				t.Fatalf("certain span %+v past rest %d", s, rest)
			}
		}
		// feed is quadratic in the text length: keep it to short inputs.
		if utf8.ValidString(text) && len(text) < 2000 {
			if got, want := feed(text, 5), texts(Sentences(text)); !reflect.DeepEqual(got, want) {
				t.Fatalf("incremental %q != whole %q for %q", got, want, text)
			}
		}
	})
}
