package synth

import (
	"context"
	"slices"
	"time"

	"voicesvc/control"
)

// Voice is THE voice access rule, for every protocol: ref names a voice by
// id, else by an alias of p's workspace, else by public catalog alias
// (docs/api.md#voices, "Workspace voice aliases"); a workspace alias
// shadows a catalog alias of the same name for that workspace. The voice
// must be the workspace's own or public (otherwise it does not exist for
// p: 404 not_found), allowed by p's access token when the token lists voice
// ids (403 voice_not_allowed, checked on the id the name resolved to), and
// ready (400 voice_not_ready).
func (s *Service) Voice(ctx context.Context, p *control.Principal, ref string) (*control.Voice, error) {
	v, err := s.lookup(ctx, p, ref)
	if err != nil {
		return nil, err
	}
	if t := p.Token; t != nil && len(t.VoiceIDs) > 0 && !slices.Contains(t.VoiceIDs, v.ID) {
		return nil, control.Errorf(control.EVoiceNotAllowed, "the access token does not allow voice %s", v.ID)
	}
	if v.Status != control.VoiceReady {
		return nil, control.Errorf(control.EVoiceNotReady, "voice %s is %s, not ready", v.ID, v.Status)
	}
	return v, nil
}

// lookup resolves ref to a voice p's workspace may use: id first, then
// workspace alias, then catalog alias. Anything else is 404. Every step
// reads the cache first; a name that cannot be a workspace alias
// (control.ValidAlias) skips that step.
func (s *Service) lookup(ctx context.Context, p *control.Principal, ref string) (*control.Voice, error) {
	now := time.Now().UnixMilli()
	if control.ValidID(ref) {
		return usableOr404(p, ref)(s.voices.get(s.store, ref, now))
	}
	if ref == "" || len(ref) > maxVoiceRef {
		return nil, voiceNotFound(ref)
	}
	if p.WorkspaceID != "" && control.ValidAlias(ref) {
		id, err := s.voices.resolveAlias(s.store, p.WorkspaceID, ref, now)
		if err != nil {
			return nil, err
		}
		if id != "" {
			v, err := s.voices.get(s.store, id, now)
			switch {
			case err == nil && v.Usable(p.WorkspaceID):
				return v, nil
			case err != nil && !control.IsCode(err, control.ENotFound):
				return nil, err
			}
			// The voice went (its "alias" change is on its way) or is no
			// longer usable: the alias names nothing, as if unset.
		}
	}
	return usableOr404(p, ref)(s.voices.getByAlias(s.store, ref, now))
}

// usableOr404 passes a voice read for ref through when p's workspace may
// use it; unknown and foreign voices are both 404, so that other
// workspaces' voices cannot be probed.
func usableOr404(p *control.Principal, ref string) func(*control.Voice, error) (*control.Voice, error) {
	return func(v *control.Voice, err error) (*control.Voice, error) {
		switch {
		case control.IsCode(err, control.ENotFound):
			return nil, voiceNotFound(ref)
		case err != nil:
			return nil, err
		case !v.Usable(p.WorkspaceID):
			return nil, voiceNotFound(ref)
		}
		return v, nil
	}
}

// UsableVoice returns the voice with id if p's workspace may use it (its
// own or public), for the resource routes, which take ids only: 404
// otherwise. Tokens do not narrow it: resource routes take keys.
func (s *Service) UsableVoice(p *control.Principal, id string) (*control.Voice, error) {
	if !control.ValidID(id) {
		return nil, voiceNotFound(id)
	}
	return usableOr404(p, id)(s.voices.Get(s.store, id))
}

// SetAliases replaces the aliases p's workspace gives voice voiceID (PUT
// /voices/{id}/aliases; an empty list removes them all) and returns them as
// stored. 404 not_found when the voice is not the workspace's own or
// public; 400 invalid_request naming a bad alias (control.ValidateAliases);
// 409 alias_taken when another voice of the workspace holds one. A refusal
// changes nothing. This server's alias cache for the workspace is dropped
// at once; other servers' by the store's "alias" change.
func (s *Service) SetAliases(ctx context.Context, p *control.Principal, voiceID string, aliases []string) ([]string, error) {
	if _, err := s.UsableVoice(p, voiceID); err != nil {
		return nil, err
	}
	list, err := control.ValidateAliases(aliases)
	if err != nil {
		return nil, err
	}
	c, cancel := s.call(ctx)
	defer cancel()
	out, err := s.store.SetVoiceAliases(c, p.WorkspaceID, voiceID, list)
	if err != nil {
		return nil, err
	}
	s.voices.InvalidateWorkspaceAliases(p.WorkspaceID)
	return out, nil
}

// Aliases returns the aliases p's workspace gives voice voiceID (GET
// /voices/{id}/aliases), in the order set; empty when none. 404 not_found
// when the voice is not the workspace's own or public.
func (s *Service) Aliases(ctx context.Context, p *control.Principal, voiceID string) ([]string, error) {
	if _, err := s.UsableVoice(p, voiceID); err != nil {
		return nil, err
	}
	c, cancel := s.call(ctx)
	defer cancel()
	return s.store.ListVoiceAliases(c, p.WorkspaceID, voiceID)
}

// maxVoiceRef bounds a name looked up in the store: aliases are at most 64
// characters, so a longer one is unknown without a round trip.
const maxVoiceRef = 64

func voiceNotFound(ref string) error {
	if len(ref) > maxVoiceRef {
		ref = ref[:maxVoiceRef] + "..."
	}
	return control.Errorf(control.ENotFound, "voice %q not found", ref)
}

// GetByAlias finds a public voice by alias. The cache keeps alias -> voice
// under "@alias" (ids are hex, so keys never collide) and trusts it only as
// far as the id entry, which invalidations reach: the voice is re-read by
// id, and a voice that lost the alias sends the lookup back to the store.
func (c *VoiceCache) GetByAlias(store VoiceStore, alias string) (*control.Voice, error) {
	return c.getByAlias(store, alias, time.Now().UnixMilli())
}

// getByAlias is GetByAlias at now (epoch ms).
func (c *VoiceCache) getByAlias(store VoiceStore, alias string, now int64) (*control.Voice, error) {
	live := c.live.Load()
	c.mu.RLock()
	e, ok := c.m["@"+alias] // a key that does not escape: no allocation on a hit
	gen := c.gen
	c.mu.RUnlock()
	if live && ok && now-e.at < c.ttl {
		if v, err := c.get(store, e.v.ID, now); err == nil && v.Alias == alias {
			return v, nil
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	v, err := store.GetVoiceByAlias(sctx, alias)
	cancel()
	if err != nil {
		return nil, err
	}
	if live {
		c.mu.Lock()
		if c.gen == gen && len(c.m) < maxCachedVoices {
			c.m["@"+alias] = voiceEntry{v: v, at: now}
		}
		c.mu.Unlock()
	}
	return v, nil
}

// UsableVoice is a voice p may speak with and the aliases p's workspace
// gives it (nil when none).
type UsableVoice struct {
	Voice   *control.Voice
	Aliases []string
}

// UsableVoices lists the ready voices p may speak with, its workspace's
// own first, then the public ones, at most max (the lists of the
// compatible endpoints). A token's voice_ids narrow it.
func (s *Service) UsableVoices(ctx context.Context, p *control.Principal, max int) ([]*control.Voice, error) {
	return s.usableVoices(ctx, p, max)
}

// UsableVoicesWithAliases is UsableVoices with each voice's workspace
// aliases (GET /compat/audio/voices lists them too).
func (s *Service) UsableVoicesWithAliases(ctx context.Context, p *control.Principal, max int) ([]UsableVoice, error) {
	voices, err := s.usableVoices(ctx, p, max)
	if err != nil {
		return nil, err
	}
	c, cancel := s.call(ctx)
	defer cancel()
	aliases, err := s.store.WorkspaceAliases(c, p.WorkspaceID)
	if err != nil {
		return nil, err
	}
	out := make([]UsableVoice, len(voices))
	for i, v := range voices {
		out[i] = UsableVoice{Voice: v, Aliases: aliases[v.ID]}
	}
	return out, nil
}

func (s *Service) usableVoices(ctx context.Context, p *control.Principal, max int) ([]*control.Voice, error) {
	c, cancel := s.call(ctx)
	defer cancel()
	var out []*control.Voice
	f := control.VoiceFilter{WorkspaceID: p.WorkspaceID, Status: control.VoiceReady, PageSize: 100}
	for f.Page = 1; len(out) < max; f.Page++ {
		voices, total, err := s.store.ListVoices(c, f)
		if err != nil {
			return nil, err
		}
		for _, v := range voices {
			if t := p.Token; t != nil && len(t.VoiceIDs) > 0 && !slices.Contains(t.VoiceIDs, v.ID) {
				continue
			}
			if len(out) < max {
				out = append(out, v)
			}
		}
		if len(voices) == 0 || f.Page*f.PageSize >= total {
			break
		}
	}
	return out, nil
}
