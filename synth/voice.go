package synth

import (
	"context"
	"slices"
	"time"

	"voicesvc/control"
)

// Voice is THE voice access rule, for every protocol: ref names a voice by
// id, else by public catalog alias (docs/api.md#voices; the workspace
// aliases of a later change slot in between). The voice must be the
// workspace's own or public (otherwise it does not exist for p: 404
// not_found), allowed by p's access token when the token lists voice ids
// (403 voice_not_allowed, checked on the id the name resolved to), and
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
// catalog alias. Anything else is 404.
func (s *Service) lookup(ctx context.Context, p *control.Principal, ref string) (*control.Voice, error) {
	var v *control.Voice
	var err error
	switch {
	case control.ValidID(ref):
		v, err = s.voices.Get(s.store, ref)
	case ref == "" || len(ref) > maxVoiceRef:
		return nil, voiceNotFound(ref)
	default:
		v, err = s.voices.GetByAlias(s.store, ref)
	}
	// Unknown and foreign voices are both 404, so that other workspaces'
	// voices cannot be probed.
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
	key := "@" + alias
	now := time.Now().UnixMilli()
	live := c.live.Load()
	c.mu.RLock()
	e, ok := c.m[key]
	gen := c.gen
	c.mu.RUnlock()
	if live && ok && now-e.at < c.ttl {
		if v, err := c.Get(store, e.v.ID); err == nil && v.Alias == alias {
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
			c.m[key] = voiceEntry{v: v, at: now}
		}
		c.mu.Unlock()
	}
	return v, nil
}

// UsableVoices lists the ready voices p may speak with, its workspace's
// own first, then the public ones, at most max (the lists of the
// compatible endpoints). A token's voice_ids narrow it.
func (s *Service) UsableVoices(ctx context.Context, p *control.Principal, max int) ([]*control.Voice, error) {
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
