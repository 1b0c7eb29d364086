package synth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"

	"voicesvc/control"
	"voicesvc/engine"
	"voicesvc/langtag"
)

// CatalogWorkspaceID owns the public catalog voices. It is a constant so
// that every server and every store agree on it without coordination.
const CatalogWorkspaceID = "000000000000000000ca7a10"

// CatalogVoiceID is the id of the catalog voice with alias: derived from
// the alias, so a catalog voice has the same id on every deployment and
// across re-seeding.
func CatalogVoiceID(alias string) string {
	h := sha256.Sum256([]byte("voicesvc catalog voice " + alias))
	return hex.EncodeToString(h[:12])
}

// SeedCatalog makes the catalog workspace own exactly the engines' voices,
// public and ready, each with its alias (docs/api.md#voices): eng's
// (the built-in engine) and each upstream's, which name their engine.
// Without an engine it seeds FallbackCatalog, the espeak-ng voices the
// embedded engine ships, so that a fresh server lists voices at once.
// An alias two engines claim stops the seeding. Safe to run at every start
// and from several servers (with the same configuration).
func SeedCatalog(ctx context.Context, store control.VoiceService, eng engine.Engine, upstreams ...engine.Engine) error {
	var cat []engine.CatalogVoice
	if eng != nil {
		cat = eng.Catalog()
	} else {
		cat = FallbackCatalog
	}
	voices, err := catalogVoices(cat, "", control.NowMS())
	if err != nil {
		return err
	}
	for _, up := range upstreams {
		more, err := catalogVoices(up.Catalog(), up.Name(), control.NowMS())
		if err != nil {
			return err
		}
		voices = append(voices, more...)
	}
	seen := make(map[string]string, len(voices))
	for _, v := range voices {
		if other, dup := seen[v.Alias]; dup {
			return fmt.Errorf("synth: catalog alias %q is claimed by two engines (%q and %q; \"\" is the built-in)",
				v.Alias, other, v.Engine)
		}
		seen[v.Alias] = v.Engine
	}
	if err := store.SeedCatalog(ctx, CatalogWorkspaceID, voices); err != nil {
		return fmt.Errorf("gateway: seed catalog: %w", err)
	}
	return nil
}

func catalogVoices(cat []engine.CatalogVoice, engineName string, now int64) ([]*control.Voice, error) {
	seen := make(map[string]bool, len(cat))
	voices := make([]*control.Voice, 0, len(cat))
	for _, c := range cat {
		if !ValidAlias(c.Alias) || seen[c.Alias] {
			return nil, fmt.Errorf("synth: catalog alias %q is invalid or repeated", c.Alias)
		}
		seen[c.Alias] = true
		lang, ok := langtag.Canonical(c.Language)
		if !ok {
			return nil, fmt.Errorf("gateway: catalog voice %q: bad language %q", c.Alias, c.Language)
		}
		keys := make([]string, 0, len(c.Labels))
		for k := range c.Labels {
			keys = append(keys, k)
		}
		sort.Strings(keys) // stable labels: re-seeding must not look like a change
		labels := make([]control.Label, 0, len(keys))
		for _, k := range keys {
			labels = append(labels, control.Label{Key: k, Value: c.Labels[k]})
		}
		voices = append(voices, &control.Voice{
			ID: CatalogVoiceID(c.Alias), OrgID: CatalogWorkspaceID, Name: c.Name,
			Status: control.VoiceReady, CloneMethod: "professional", Visibility: "public",
			PrimaryLanguage: lang, Labels: labels, Alias: c.Alias, Profile: c.Profile, Engine: engineName,
			ConsentAt: now, CreatedAt: now, UpdatedAt: now,
		})
	}
	return voices, nil
}

// ValidAlias: lowercase letters, digits and hyphens (docs/api.md#voice-object).
func ValidAlias(a string) bool {
	if a == "" || len(a) > 64 {
		return false
	}
	for i := 0; i < len(a); i++ {
		c := a[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// FallbackCatalog lists real espeak-ng voices (language + variant) until
// the engine provides its own catalog; Profile is the espeak-ng voice name
// the embedded engine understands.
var FallbackCatalog = func() []engine.CatalogVoice {
	type v struct{ alias, name, lang, voice, gender, accent string }
	list := []v{
		{"en-us-m1", "English (US) Male", "en-US", "en-us+m1", "male", "american"},
		{"en-us-f1", "English (US) Female", "en-US", "en-us+f1", "female", "american"},
		{"en-gb-m3", "English (UK) Male", "en-GB", "en-gb+m3", "male", "british"},
		{"en-gb-f2", "English (UK) Female", "en-GB", "en-gb+f2", "female", "british"},
		{"de-m2", "German Male", "de", "de+m2", "male", "german"},
		{"fr-f1", "French Female", "fr", "fr-fr+f1", "female", "french"},
		{"es-m1", "Spanish Male", "es", "es+m1", "male", "castilian"},
		{"it-f3", "Italian Female", "it", "it+f3", "female", "italian"},
		{"pt-br-m1", "Portuguese (Brazil) Male", "pt-BR", "pt-br+m1", "male", "brazilian"},
		{"hi-f1", "Hindi Female", "hi", "hi+f1", "female", "indian"},
	}
	out := make([]engine.CatalogVoice, len(list))
	for i, x := range list {
		out[i] = engine.CatalogVoice{Alias: x.alias, Name: x.name, Language: x.lang,
			Labels:  map[string]string{"gender": x.gender, "accent": x.accent, "use_case": "general"},
			Profile: []byte(x.voice)}
	}
	return out
}()
