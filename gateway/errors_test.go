package gateway

import (
	"context"
	"strings"
	"testing"

	"voicesvc/control"
	"voicesvc/synth"
)

// TestErrorStatuses covers every status and code of interface section 7
// that the voices, jobs and infrastructure routes can produce, each through
// real HTTP, checking envelope shape, code (or its absence) and request id.
func TestErrorStatuses(t *testing.T) {
	ts := newTestServer(t, "")
	ctx := context.Background()
	if err := synth.SeedCatalog(ctx, ts.store, nil); err != nil {
		t.Fatal(err)
	}
	public := synth.CatalogVoiceID(synth.FallbackCatalog[0].Alias)

	other := ts.workspace("free")
	otherKey := ts.newKey(other.ID, nil, 0, false)
	otherVoice := ts.createVoice(otherKey, "theirs")["id"].(string)
	draft := ts.createVoice(ts.key, "draft")["id"].(string)

	revokedKey := ts.newKey(ts.ws.ID, nil, 0, false)
	k, err := ts.store.GetAPIKeyByHash(ctx, control.HashSecret(revokedKey))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.store.RevokeAPIKey(ctx, k.ID, control.NowMS()); err != nil {
		t.Fatal(err)
	}
	expiredKey := ts.newKey(ts.ws.ID, nil, control.NowMS()-1000, false)
	ttsKey := ts.newKey(ts.ws.ID, []string{control.ScopeTTS}, 0, false)
	readKey := ts.newKey(ts.ws.ID, []string{control.ScopeVoicesRead}, 0, false)
	unknownKey, _ := control.NewAPIKeySecret()

	job := &control.Job{}
	otherJobVoice := &control.Voice{ID: control.NewID(), OrgID: other.ID, Name: "j", Visibility: "private"}
	if err := ts.store.StartEnrollment(ctx, otherJobVoice, true, job, &control.Clip{Data: []byte("x")}); err != nil {
		t.Fatal(err)
	}

	voice := func(extra string) string { return `{"name":"v","consent":true` + extra + `}` }
	tests := []struct {
		name         string
		method, path string
		key          string
		body         string
		headers      []string
		status       int
		code         string // "" = no code
	}{
		// 400
		{"malformed json", "POST", "/voices", ts.key, `{"name":`, nil, 400, control.EInvalidJSON},
		{"trailing garbage", "POST", "/voices", ts.key, voice("") + "x", nil, 400, control.EInvalidJSON},
		{"not an object", "POST", "/voices", ts.key, `[1]`, nil, 400, control.EInvalidRequest},
		{"consent missing", "POST", "/voices", ts.key, `{"name":"v"}`, nil, 400, control.EConsentRequired},
		{"consent false", "POST", "/voices", ts.key, `{"name":"v","consent":false}`, nil, 400, control.EConsentRequired},
		{"consent string", "POST", "/voices", ts.key, `{"name":"v","consent":"true"}`, nil, 400, control.EConsentRequired},
		{"name missing", "POST", "/voices", ts.key, `{"consent":true}`, nil, 400, control.EInvalidRequest},
		{"name number", "POST", "/voices", ts.key, `{"name":5,"consent":true}`, nil, 400, control.EInvalidRequest},
		{"name too long", "POST", "/voices", ts.key, `{"name":"` + strings.Repeat("é", 101) + `","consent":true}`, nil, 400, control.EInvalidRequest},
		{"description too long", "POST", "/voices", ts.key, voice(`,"description":"` + strings.Repeat("d", 1001) + `"`), nil, 400, control.EInvalidRequest},
		{"visibility public", "POST", "/voices", ts.key, voice(`,"visibility":"public"`), nil, 400, control.EInvalidRequest},
		{"labels wrong type", "POST", "/voices", ts.key, voice(`,"labels":{"a":"b"}`), nil, 400, control.EInvalidRequest},
		{"speed out of range", "POST", "/voices", ts.key, voice(`,"settings":{"speed":10}`), nil, 400, control.EInvalidSettings},
		{"speed as string", "POST", "/voices", ts.key, voice(`,"settings":{"speed":"fast"}`), nil, 400, control.EInvalidSettings},
		{"settings not object", "POST", "/voices", ts.key, voice(`,"settings":[1]`), nil, 400, control.EInvalidSettings},
		{"pitch out of range", "PATCH", "/voices/" + draft, ts.key, `{"settings":{"pitch":-13}}`, nil, 400, control.EInvalidSettings},
		{"engine_params too big", "POST", "/voices", ts.key, voice(`,"settings":{"engine_params":{"x":"` + strings.Repeat("p", 5000) + `"}}`), nil, 400, control.EInvalidSettings},
		{"bad language", "POST", "/voices", ts.key, voice(`,"primary_language":"english!"`), nil, 400, control.EInvalidLanguage},
		{"language number", "PATCH", "/voices/" + draft, ts.key, `{"primary_language":1}`, nil, 400, control.EInvalidLanguage},
		{"base voice malformed", "POST", "/voices", ts.key, voice(`,"base_voice_id":"zz"`), nil, 400, control.EInvalidVoiceID},
		{"base voice of other workspace", "POST", "/voices", ts.key, voice(`,"base_voice_id":"` + otherVoice + `"`), nil, 400, control.EInvalidVoiceID},
		{"base voice not ready", "POST", "/voices", ts.key, voice(`,"base_voice_id":"` + draft + `"`), nil, 400, control.EVoiceNotReady},
		{"page zero", "GET", "/voices?page=0", ts.key, "", nil, 400, control.EInvalidPage},
		{"page_size 101", "GET", "/voices?page_size=101", ts.key, "", nil, 400, control.EInvalidPage},
		{"page not a number", "GET", "/voices?page=two", ts.key, "", nil, 400, control.EInvalidPage},
		{"status filter unknown", "GET", "/voices?status=done", ts.key, "", nil, 400, control.EInvalidRequest},
		{"headers too large", "GET", "/voices", ts.key, "", []string{"X-Pad", strings.Repeat("p", 20<<10)}, 400, control.EInvalidRequest},
		// 401
		{"no key", "GET", "/voices", "", "", nil, 401, ""},
		{"malformed key", "GET", "/voices", "vsk_short", "", nil, 401, ""},
		{"unknown key", "GET", "/voices", unknownKey, "", nil, 401, ""},
		{"revoked key", "GET", "/voices", revokedKey, "", nil, 401, ""},
		{"bearer key on a key-only route", "GET", "/voices", "", "", []string{"Authorization", "Bearer " + ts.key}, 401, ""},
		{"expired key", "GET", "/voices", expiredKey, "", nil, 401, control.EKeyExpired},
		// 403
		{"tts key lists voices", "GET", "/voices", ttsKey, "", nil, 403, control.EInsufficientScope},
		{"read key creates", "POST", "/voices", readKey, voice(""), nil, 403, control.EInsufficientScope},
		{"read key deletes", "DELETE", "/voices/" + draft, readKey, "", nil, 403, control.EInsufficientScope},
		{"tts key reads a job", "GET", "/jobs/" + job.ID, ttsKey, "", nil, 403, control.EInsufficientScope},
		// 404
		{"malformed voice id", "GET", "/voices/not-an-id", ts.key, "", nil, 404, control.ENotFound},
		{"upper-case voice id", "GET", "/voices/" + strings.ToUpper(draft), ts.key, "", nil, 404, control.ENotFound},
		{"unknown voice", "GET", "/voices/" + control.NewID(), ts.key, "", nil, 404, control.ENotFound},
		{"other workspace's voice", "GET", "/voices/" + otherVoice, ts.key, "", nil, 404, control.ENotFound},
		{"patch other workspace's voice", "PATCH", "/voices/" + otherVoice, ts.key, `{"name":"x"}`, nil, 404, control.ENotFound},
		{"patch public voice", "PATCH", "/voices/" + public, ts.key, `{"name":"x"}`, nil, 404, control.ENotFound},
		{"delete public voice", "DELETE", "/voices/" + public, ts.key, "", nil, 404, control.ENotFound},
		{"delete other workspace's voice", "DELETE", "/voices/" + otherVoice, ts.key, "", nil, 404, control.ENotFound},
		{"delete malformed id", "DELETE", "/voices/xyz", ts.key, "", nil, 404, control.ENotFound},
		{"unknown job", "GET", "/jobs/" + control.NewID(), ts.key, "", nil, 404, control.ENotFound},
		{"other workspace's job", "GET", "/jobs/" + job.ID, ts.key, "", nil, 404, control.ENotFound},
		{"malformed job id", "GET", "/jobs/1", ts.key, "", nil, 404, control.ENotFound},
		{"unknown route", "GET", "/nope", ts.key, "", nil, 404, control.ENotFound},
		{"unknown root route", "GET", "!/nope", "", "", nil, 404, control.ENotFound},
		{"trailing slash", "GET", "/voices/", ts.key, "", nil, 404, control.ENotFound},
		// 405
		{"put voices", "PUT", "/voices", ts.key, "", nil, 405, control.EMethodNotAllowed},
		{"post a voice id", "POST", "/voices/" + draft, ts.key, "{}", nil, 405, control.EMethodNotAllowed},
		{"post healthz", "POST", "!/healthz", "", "", nil, 405, control.EMethodNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body any
			if tt.body != "" {
				body = tt.body
			}
			ts.do(tt.method, tt.path, tt.key, body, tt.headers...).failure(t, tt.status, tt.code)
		})
	}
	// 413: a JSON body over its limit, refused from the Content-Length
	// (sent without a body; see headersOnly).
	t.Run("json body too large", func(t *testing.T) {
		ts.headersOnly(t, "/voices", "application/json", 300<<10).failure(t, 413, control.EPayloadTooLarge)
	})
}

// A failure in the store is a 500 "internal error" whose detail is not
// shown; the store being closed is the easy way to get one.
func TestInternalErrorHidesDetail(t *testing.T) {
	ts := newTestServer(t, "")
	ts.do("GET", "/voices", ts.key, nil).data(t, 200) // key now cached
	ts.store.Close()
	r := ts.do("GET", "/voices", ts.key, nil)
	r.failure(t, 500, control.EInternal)
	if r.json["message"] != "internal error" {
		t.Errorf("message %q leaks detail", r.json["message"])
	}
}

// TestScopeErrorNamesTheScope: a 403 insufficient_scope says which scope
// the key lacks (issue 28: the dashboard could not tell).
func TestScopeErrorNamesTheScope(t *testing.T) {
	ts := newTestServer(t, "")
	ttsKey := ts.newKey(ts.ws.ID, []string{control.ScopeTTS}, 0, false)
	for path, scope := range map[string]string{"/voices": control.ScopeVoicesRead} {
		r := ts.do("GET", path, ttsKey, nil)
		r.failure(t, 403, control.EInsufficientScope)
		if msg, _ := r.json["message"].(string); !strings.Contains(msg, `"`+scope+`"`) {
			t.Errorf("GET %s: message %q does not name %s", path, msg, scope)
		}
	}
}
