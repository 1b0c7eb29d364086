package gateway

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"voicesvc/control"
	"voicesvc/synth"
)

// mintToken creates an access token with body and returns it.
func (ts *testServer) mintToken(key string, body any) string {
	ts.t.Helper()
	d := ts.do("POST", "/tokens", key, body).data(ts.t, 201)
	tok, _ := d["token"].(string)
	if !control.ValidAccessTokenFormat(tok) {
		ts.t.Fatalf("token %q", tok)
	}
	return tok
}

func bearerHdr(tok string) []string { return []string{"Authorization", "Bearer " + tok} }

func TestCreateToken(t *testing.T) {
	ss := newSynthServer(t, synthOpts{})
	public := synth.CatalogVoiceID(ss.srv.engine.Catalog()[0].Alias)
	now := control.NowMS()
	for _, body := range []any{nil, "{}", " ", map[string]any{"ttl_seconds": nil}} {
		d := ss.do("POST", "/tokens", ss.key, body).data(t, 201)
		exp, _ := d["expires_at"].(float64)
		if d["ttl_seconds"] != float64(300) || int64(exp) < now+299_000 || int64(exp) > control.NowMS()+300_000 || len(d) != 3 {
			t.Fatalf("default token (body %v): %v", body, d)
		}
	}
	for _, ttl := range []int{10, 3600} {
		if d := ss.do("POST", "/tokens", ss.key, map[string]any{"ttl_seconds": ttl}).data(t, 201); d["ttl_seconds"] != float64(ttl) {
			t.Fatalf("ttl %d: %v", ttl, d)
		}
	}
	for _, bad := range []string{`{"ttl_seconds":9}`, `{"ttl_seconds":3601}`, `{"ttl_seconds":"300"}`,
		`{"ttl_seconds":300.5}`, `{"ttl_seconds":-1}`, `{"ttl_seconds":1e40}`} {
		ss.do("POST", "/tokens", ss.key, bad).failure(t, 400, control.EInvalidTTL)
	}
	ss.do("POST", "/tokens", ss.key, `{"voice_ids":"x"}`).failure(t, 400, control.EInvalidVoiceID)
	ss.do("POST", "/tokens", ss.key, `{"ttl_seconds":`).failure(t, 400, control.EInvalidJSON)
	other := ss.readyVoice(ss.workspace("pro").ID, "en")
	for _, bad := range []string{"0123456789abcdef01234567", "nope", other} {
		r := ss.do("POST", "/tokens", ss.key, map[string]any{"voice_ids": []string{ss.voice, bad}})
		r.failure(t, 400, control.EInvalidVoiceID)
		if !strings.Contains(r.json["message"].(string), bad) {
			t.Errorf("message does not name %q: %s", bad, r.body)
		}
	}
	ss.mintToken(ss.key, map[string]any{"voice_ids": []string{ss.voice, public, ss.voice}})

	// Scope tts; API keys only.
	noTTS := ss.newKey(ss.ws.ID, []string{control.ScopeVoicesRead}, 0, false)
	ss.do("POST", "/tokens", noTTS, nil).failure(t, 403, control.EInsufficientScope)
	tok := ss.mintToken(ss.key, nil)
	ss.do("POST", "/tokens", "", nil, bearerHdr(tok)...).failure(t, 401, "")

	// The lifetime stops at the creating key's expiry.
	soon := ss.newKey(ss.ws.ID, nil, control.NowMS()+60_000, false)
	if d := ss.do("POST", "/tokens", soon, nil).data(t, 201); d["ttl_seconds"].(float64) > 60 {
		t.Fatalf("ttl beyond the key's expiry: %v", d)
	}
	// Only the hash is stored.
	c, cancel := storeCtx()
	defer cancel()
	st, err := ss.store.GetTokenByHash(c, control.HashSecret(tok))
	if err != nil || st.WorkspaceID != ss.ws.ID || st.ConsumedAt != 0 {
		t.Fatalf("stored token: %+v %v", st, err)
	}
}

func TestTokenUse(t *testing.T) {
	ss := newSynthServer(t, synthOpts{billing: control.BillingEnforce})
	speak := "/voices/" + ss.voice + "/speak"
	body := map[string]any{"text": "hello", "output_format": "s16le"}

	tok := ss.mintToken(ss.key, nil)
	if r := ss.do("POST", speak, "", body, bearerHdr(tok)...); r.status != 200 || len(r.body) == 0 {
		t.Fatalf("first use: %d %s", r.status, r.body)
	}
	ss.do("POST", speak, "", body, bearerHdr(tok)...).failure(t, 401, control.ETokenInvalid)
	ss.do("POST", speak, "", body, bearerHdr("vst_"+strings.Repeat("a", 40))...).failure(t, 401, control.ETokenInvalid)
	ss.do("POST", speak, "", body, bearerHdr("vst_short")...).failure(t, 401, control.ETokenInvalid)

	// SSE stream: the same single use.
	tok = ss.mintToken(ss.key, nil)
	stream := "/voices/" + ss.voice + "/stream"
	if r := ss.do("POST", stream, "", map[string]any{"text": "hello"}, bearerHdr(tok)...); r.status != 200 {
		t.Fatalf("stream: %d %s", r.status, r.body)
	}
	ss.do("POST", stream, "", map[string]any{"text": "hello"}, bearerHdr(tok)...).failure(t, 401, control.ETokenInvalid)

	// Where tts does not reach: 403; tts routes that take keys only: 401.
	tok = ss.mintToken(ss.key, nil)
	ss.do("GET", "/voices", "", nil, bearerHdr(tok)...).failure(t, 403, control.EInsufficientScope)
	ss.do("POST", "/voices", "", map[string]any{"name": "x", "consent": true}, bearerHdr(tok)...).failure(t, 403, control.EInsufficientScope)
	ss.do("GET", "/voices/"+ss.voice, "", nil, bearerHdr(tok)...).failure(t, 403, control.EInsufficientScope)

	// Refused before running (validation, voice_not_allowed, 402): still valid.
	limited := ss.mintToken(ss.key, map[string]any{"voice_ids": []string{ss.voice}})
	public := synth.CatalogVoiceID(ss.srv.engine.Catalog()[0].Alias)
	ss.do("POST", "/voices/"+public+"/speak", "", body, bearerHdr(limited)...).failure(t, 403, control.EVoiceNotAllowed)
	ss.do("POST", speak, "", map[string]any{"text": ""}, bearerHdr(limited)...).failure(t, 400, control.ETextRequired)
	used := int64(10_000_000)
	ss.store.UpdateWorkspace(t.Context(), ss.ws.ID, control.WorkspaceUpdate{Used: &used})
	ss.srv.core.ResetKeys()
	if r := ss.do("POST", speak, "", body, bearerHdr(limited)...); r.status != 402 {
		t.Fatalf("want 402, got %d %s", r.status, r.body)
	}
	used = 0
	ss.store.UpdateWorkspace(t.Context(), ss.ws.ID, control.WorkspaceUpdate{Used: &used})
	ss.srv.core.ResetKeys()
	if r := ss.do("POST", speak, "", body, bearerHdr(limited)...); r.status != 200 {
		t.Fatalf("after refusals: %d %s", r.status, r.body)
	}

	// Expired.
	secret, hash := control.NewAccessTokenSecret()
	if err := ss.store.CreateToken(t.Context(), &control.AccessToken{Hash: hash, WorkspaceID: ss.ws.ID,
		KeyID: "k", ExpiresAt: control.NowMS() + 100}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	ss.do("POST", speak, "", body, bearerHdr(secret)...).failure(t, 401, control.ETokenInvalid)
}

// TestTokenKeyRevoked: revoking or expiry of the creating key makes its
// tokens unusable (401 token_invalid).
func TestTokenKeyRevoked(t *testing.T) {
	ss := newSynthServer(t, synthOpts{})
	st, ts := ss.store, ss
	newKey := func(expires int64) (string, string) {
		secret, hash := control.NewAPIKeySecret()
		k := &control.APIKey{WorkspaceID: ss.ws.ID, Hash: hash, Scopes: control.AllScopes, ExpiresAt: expires}
		if err := st.CreateAPIKey(t.Context(), k); err != nil {
			t.Fatal(err)
		}
		return secret, k.ID
	}
	speak := "/voices/" + ss.voice + "/speak"
	key, id := newKey(0)
	tok, spare := ts.mintToken(key, nil), ts.mintToken(key, nil)
	if r := ts.do("POST", speak, "", map[string]any{"text": "hi"}, bearerHdr(tok)...); r.status != 200 {
		t.Fatalf("before revocation: %d %s", r.status, r.body)
	}
	if _, err := st.RevokeAPIKey(t.Context(), id, control.NowMS()); err != nil {
		t.Fatal(err)
	}
	ts.do("POST", speak, "", map[string]any{"text": "hi"}, bearerHdr(spare)...).failure(t, 401, control.ETokenInvalid)

	short, _ := newKey(control.NowMS() + 1500)
	tok = ts.mintToken(short, nil)
	time.Sleep(1600 * time.Millisecond)
	ts.do("POST", speak, "", map[string]any{"text": "hi"}, bearerHdr(tok)...).failure(t, 401, control.ETokenInvalid)
}

// TestTokenRateLimited: a token refused with 429 works afterwards.
func TestTokenRateLimited(t *testing.T) {
	ss := newSynthServer(t, synthOpts{plan: "free"})
	speak := "/voices/" + ss.voice + "/speak"
	tok := ss.mintToken(ss.key, nil) // 1 of 2 this second
	ss.do("GET", "/voices", ss.key, nil)
	r := ss.do("POST", speak, "", map[string]any{"text": "hi"}, bearerHdr(tok)...)
	r.failure(t, 429, control.ERateLimited)
	if _, ok := waitFor(3*time.Second, func() bool {
		r = ss.do("POST", speak, "", map[string]any{"text": "hi"}, bearerHdr(tok)...)
		return r.status != 429
	}); !ok || r.status != 200 {
		t.Fatalf("after 429: %d %s", r.status, r.body)
	}
}

// TestTokenConcurrentUse: of 50 simultaneous uses exactly one succeeds.
func TestTokenConcurrentUse(t *testing.T) {
	ss := newSynthServer(t, synthOpts{})
	slots := 100
	ss.store.UpdateWorkspace(t.Context(), ss.ws.ID, control.WorkspaceUpdate{Concurrency: &slots})
	ss.srv.core.ResetKeys()
	tok := ss.mintToken(ss.key, nil)
	codes := raceToken(t, ss.base+APIRoot+"/voices/"+ss.voice+"/speak", tok, 50)
	if codes["200"] != 1 || codes["401 token_invalid"] != 49 {
		t.Fatalf("outcomes: %v", codes)
	}
}

// raceToken sends n speak requests with one token at once and counts the
// outcomes ("200", "401 token_invalid", ...).
func raceToken(t testing.TB, url, tok string, n int) map[string]int {
	t.Helper()
	var mu sync.Mutex
	codes := map[string]int{}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			req, _ := http.NewRequestWithContext(context.Background(), "POST", url, strings.NewReader(`{"text":"hi","output_format":"s16le"}`))
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := http.DefaultClient.Do(req)
			out := "error"
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				out = strings.TrimSpace(strings.Fields(resp.Status)[0])
				if resp.StatusCode != 200 {
					if i := strings.Index(string(b), `"code":"`); i >= 0 {
						rest := string(b)[i+8:]
						out += " " + rest[:strings.IndexByte(rest, '"')]
					}
				}
			}
			mu.Lock()
			codes[out]++
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	return codes
}
