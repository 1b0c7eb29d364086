package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"voicesvc/engine"
)

// Bounds on a voice list: Kokoro-FastAPI lists about 70 voices in 3 KiB.
const (
	maxVoicesBody = 1 << 20
	maxVoices     = 1000
)

// Discover lists the upstream's voices (GET {url}/audio/voices, from the
// first replica that answers) and adds each as a catalog voice with alias
// "<engine name>-<voice>", unless the voice or the alias is configured
// already. It does nothing unless the configuration asks for discovery,
// and returns how many voices it added. Calling it again replaces the
// discovered voices.
//
// Two shapes are understood: Kokoro-FastAPI's {"voices":[{"id","name"}]}
// (and its legacy {"voices":["af_bella",...]}), and voicesvc's compat
// {"voices":[{"id","name","language"}]}. A voice without a language takes
// it from a Kokoro voice name's prefix ("bf_emma": British English), else
// English.
func (e *Engine) Discover(ctx context.Context) (int, error) {
	if !e.cfg.Discover {
		return 0, nil
	}
	var errs []error
	for _, r := range e.sched.replicas {
		list, err := e.listVoices(ctx, r)
		if err != nil {
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
			continue
		}
		voices := e.catalogOf(list)
		e.mu.Lock()
		e.discovered = voices
		e.mu.Unlock()
		langs := languagesOf(e.Catalog())
		e.mu.Lock()
		e.langs = langs
		e.mu.Unlock()
		return len(voices), nil
	}
	return 0, fmt.Errorf("upstream %s: discover voices: %w", e.cfg.Name, errors.Join(errs...))
}

// listedVoice is one entry of a voice list: a bare name or an object.
type listedVoice struct {
	ID, Name, Language string
}

func (v *listedVoice) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &v.ID)
	}
	var o struct {
		ID       string `json:"id"`
		Name     string `json:"name"`
		Language string `json:"language"`
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return err
	}
	v.ID, v.Name, v.Language = o.ID, o.Name, o.Language
	return nil
}

func (e *Engine) listVoices(ctx context.Context, r *replica) ([]listedVoice, error) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	x, _, err := r.client.do(ctx, &request{method: http.MethodGet, head: r.voicesHead})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.display, err)
	}
	resp := x.resp
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxVoicesBody+1))
	x.done(err == nil && len(body) <= maxVoicesBody)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.display, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered %d: %s", r.display, resp.StatusCode, upstreamMessage(body, resp.StatusCode))
	}
	if len(body) > maxVoicesBody {
		return nil, fmt.Errorf("%s: voice list larger than %d bytes", r.display, maxVoicesBody)
	}
	var doc struct {
		Voices []listedVoice `json:"voices"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("%s: voice list: %w", r.display, err)
	}
	if len(doc.Voices) > maxVoices {
		doc.Voices = doc.Voices[:maxVoices]
	}
	return doc.Voices, nil
}

// catalogOf makes catalog voices of a voice list, skipping what the
// configuration has already and what cannot be an alias.
func (e *Engine) catalogOf(list []listedVoice) []engine.CatalogVoice {
	taken := map[string]bool{}
	for _, v := range e.cfg.Voices {
		taken[v.Alias] = true
		taken["voice:"+v.Voice] = true
	}
	var out []engine.CatalogVoice
	for _, v := range list {
		alias := aliasOf(e.cfg.Name, v.ID)
		if v.ID == "" || !validAlias(alias) || taken[alias] || taken["voice:"+v.ID] {
			continue
		}
		taken[alias], taken["voice:"+v.ID] = true, true
		lang, labels := v.Language, map[string]string(nil)
		if kl, gender, ok := kokoroVoice(v.ID); ok {
			if lang == "" {
				lang = kl
			}
			labels = map[string]string{"gender": gender}
		}
		if !validLanguage(lang) {
			lang = "en"
		}
		name := v.Name
		if name == "" {
			name = v.ID
		}
		out = append(out, engine.CatalogVoice{Alias: alias, Name: name + " (" + e.cfg.Name + ")",
			Language: lang, Labels: labels, Profile: []byte(v.ID)})
	}
	return out
}

// aliasOf is "<engine>-<voice>" in the catalog's alphabet: lowercase, and
// any run of other characters one hyphen ("af_bella" -> "up1-af-bella").
func aliasOf(engineName, voice string) string {
	var b strings.Builder
	b.WriteString(engineName)
	b.WriteByte('-')
	hyphen := true
	for _, r := range strings.ToLower(voice) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			hyphen = false
		} else if !hyphen {
			b.WriteByte('-')
			hyphen = true
		}
	}
	alias := strings.TrimRight(b.String(), "-")
	if len(alias) <= len(engineName) {
		return "" // nothing of the voice's name is left
	}
	return alias
}

// kokoroLanguages maps the first letter of a Kokoro voice name to its
// language (Kokoro's lang_code).
var kokoroLanguages = map[byte]string{
	'a': "en-US", 'b': "en-GB", 'e': "es", 'f': "fr", 'h': "hi",
	'i': "it", 'j': "ja", 'p': "pt-BR", 'z': "zh",
}

// kokoroVoice reads a Kokoro voice name such as "af_bella": language,
// then f or m, then an underscore.
func kokoroVoice(id string) (lang, gender string, ok bool) {
	if len(id) < 4 || id[2] != '_' {
		return "", "", false
	}
	lang, ok = kokoroLanguages[id[0]]
	switch id[1] {
	case 'f':
		gender = "female"
	case 'm':
		gender = "male"
	default:
		ok = false
	}
	return lang, gender, ok
}
