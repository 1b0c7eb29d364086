package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"mime/multipart"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"voicesvc/codec"
	"voicesvc/e2e/harness"
)

// TestOpenAPIConformance starts the real binary and checks real exchanges of
// every endpoint against the openapi.yaml that binary serves: each request
// with openapi3filter.ValidateRequest (valid where the test means it to be,
// invalid where it is the refusal under test) and each response with
// ValidateResponse, statuses not in the document included. SSE events are
// checked against the document's event schemas.
func TestOpenAPIConformance(t *testing.T) {
	srv := harness.Start(t, harness.Options{Args: []string{"--engine-workers", "1"}})
	oas := oasLoad(t, srv)
	e := newEnv(t, srv, "pro")
	key := keyHdr(e.key)
	api := srv.API

	// Operations.
	oas.check(t, "healthz", oasReq("GET", srv.URL+"/healthz", nil), true, 200)
	oas.check(t, "readyz", oasReq("GET", srv.URL+"/readyz", nil), true, 200)
	oas.check(t, "metrics", oasReq("GET", srv.URL+"/metrics", nil), true, 200)
	oas.check(t, "openapi", oasReq("GET", srv.URL+"/openapi.yaml", nil), true, 200)
	oas.check(t, "docs index", oasReq("GET", srv.URL+"/docs/", nil), true, 200)
	oas.check(t, "docs page", oasReq("GET", srv.URL+"/docs/realtime.md", nil), true, 200)
	oas.check(t, "docs 404", oasReq("GET", srv.URL+"/docs/nothing.md", nil), true, 404)
	oas.check(t, "media 404", oasReq("GET", srv.URL+"/media/"+strings.Repeat("a", 24)+"-"+strings.Repeat("b", 24)+".wav", nil), true, 404)

	// Voices: list, create, get, patch; delete at the end.
	oas.check(t, "list voices", oasReq("GET", api+"/voices?page=1&page_size=5&status=ready", nil, key...), true, 200)
	r := oas.check(t, "create voice", oasJSON("POST", api+"/voices", map[string]any{
		"name": "Narrator", "consent": true, "primary_language": "en",
		"labels":   []map[string]string{{"key": "use_case", "value": "docs"}},
		"settings": map[string]any{"speed": 1.1, "pitch": -2},
	}, key...), true, 201)
	draft := r.data(t)["voice"].(map[string]any)["id"].(string)
	oas.check(t, "get voice", oasReq("GET", api+"/voices/"+draft, nil, key...), true, 200)
	oas.check(t, "patch voice", oasJSON("PATCH", api+"/voices/"+draft, map[string]any{
		"description": "reads the docs aloud", "visibility": "org"}, key...), true, 200)
	remix := oas.check(t, "create remix", oasJSON("POST", api+"/voices", map[string]any{
		"name": "Remix", "consent": true, "base_voice_id": e.voice}, key...), true, 201)
	remixID := remix.data(t)["voice"].(map[string]any)["id"].(string)

	// Workspace aliases: set, list, refused (taken, malformed), and the
	// name spoken on the speak path and the compat voice field.
	aliases := api + "/voices/" + remixID + "/aliases"
	oas.check(t, "put aliases", oasJSON("PUT", aliases, map[string]any{"aliases": []string{"alloy", "narrator.v2"}}, key...), true, 200)
	r = oas.check(t, "get aliases", oasReq("GET", aliases, nil, key...), true, 200)
	if got := r.data(t)["aliases"].([]any); len(got) != 2 || got[0] != "alloy" {
		t.Errorf("aliases %v", got)
	}
	r = oas.check(t, "get voice with aliases", oasReq("GET", api+"/voices/"+remixID, nil, key...), true, 200)
	if got := r.data(t)["voice"].(map[string]any)["workspace_aliases"].([]any); len(got) != 2 {
		t.Errorf("workspace_aliases %v", got)
	}
	catAliases := api + "/voices/" + e.voice + "/aliases"
	oas.check(t, "put aliases taken", oasJSON("PUT", catAliases, map[string]any{"aliases": []string{"alloy"}}, key...), true, 409)
	oas.check(t, "put aliases malformed", oasJSON("PUT", catAliases, map[string]any{"aliases": []string{"no spaces"}}, key...), false, 400)
	oas.check(t, "put aliases id-shaped", oasJSON("PUT", catAliases, map[string]any{"aliases": []string{strings.Repeat("ab", 12)}}, key...), false, 400)
	oas.check(t, "put aliases missing", oasJSON("PUT", catAliases, map[string]any{}, key...), false, 400)
	oas.check(t, "get aliases 404", oasReq("GET", api+"/voices/"+strings.Repeat("0", 24)+"/aliases", nil, key...), true, 404)
	oas.check(t, "speak by alias", oasJSON("POST", api+"/voices/alloy/speak", map[string]any{"text": "Hi."}, key...), true, 200)
	oas.check(t, "speak by unknown name", oasJSON("POST", api+"/voices/shimmer/speak", map[string]any{"text": "Hi."}, key...), true, 404)
	oas.check(t, "compat by alias", oasJSON("POST", api+"/compat/audio/speech", map[string]any{
		"model": "tts-1", "voice": "alloy", "input": "Hi.", "response_format": "pcm"}, bearerHdr(e.key)...), true, 200)

	// Cloning: enroll the draft, clone a new voice, poll both jobs.
	clip := oasTone(2)
	r = oas.check(t, "enroll", oasUpload(api+"/voices/"+draft+"/enroll",
		[][2]string{{"consent", "true"}, {"language", "en"}}, clip, key...), true, 202)
	enrollJob := r.data(t)["job_id"].(string)
	r = oas.check(t, "clone", oasUpload(api+"/voices/clone",
		[][2]string{{"consent", "true"}, {"name", "Cloned"}, {"labels", `[{"key":"gender","value":"female"}]`}}, clip, key...), true, 202)
	cloneJob := r.data(t)["job_id"].(string)
	// A ready voice (the remix) is busy for enrollment whatever the jobs
	// above do meanwhile: the draft's own job may already have failed,
	// which would make it enrollable again.
	oas.check(t, "enroll busy", oasUpload(api+"/voices/"+remixID+"/enroll",
		[][2]string{{"consent", "true"}}, clip, key...), true, 409)
	oas.check(t, "enroll no consent", oasUpload(api+"/voices/"+remixID+"/enroll",
		[][2]string{{"consent", "false"}}, clip, key...), false, 400)
	for _, job := range []string{enrollJob, cloneJob} {
		final := poll(60*time.Second, func() bool {
			r := oas.check(t, "get job", oasReq("GET", api+"/jobs/"+job, nil, key...), true, 200)
			switch r.data(t)["status"] {
			case "succeeded", "failed", "cancelled", "expired":
				return true
			}
			return false
		})
		if !final {
			t.Errorf("job %s did not finish within 60 s", job)
		}
	}

	// Synthesis.
	speak := api + "/voices/" + e.voice + "/speak"
	oas.check(t, "speak wav", oasJSON("POST", speak, map[string]any{"text": "Hello."}, key...), true, 200)
	r = oas.check(t, "speak raw", oasJSON("POST", speak, map[string]any{
		"text": "Hello.", "output_format": "s16le", "sample_rate": 16000}, key...), true, 200)
	if r.header.Get("X-Audio-Format") != "s16le" || len(r.body) == 0 {
		t.Errorf("speak raw: %v, %d bytes", r.header, len(r.body))
	}
	idem := append([]string{"Idempotency-Key", "docs-e2e-1"}, key...)
	oas.check(t, "speak idempotent", oasJSON("POST", speak, map[string]any{"text": "Once."}, idem...), true, 200)
	r = oas.check(t, "speak replayed", oasJSON("POST", speak, map[string]any{"text": "Once."}, idem...), true, 200)
	if r.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("replay without Idempotent-Replayed: %v", r.header)
	}
	r = oas.check(t, "stream", oasJSON("POST", api+"/voices/"+e.voice+"/stream", map[string]any{
		"text": "Hello there.", "output_format": "s16le"}, key...), true, 200)
	oas.checkSSE(t, r.body)
	// Telephony: G.711 at 8000 Hz, raw on speak and in SSE chunks; speed.
	r = oas.check(t, "speak mulaw", oasJSON("POST", speak, map[string]any{
		"text": "Hello.", "output_format": "mulaw", "sample_rate": 8000, "speed": 1.5}, key...), true, 200)
	if r.header.Get("X-Audio-Format") != "mulaw" || r.header.Get("X-Sample-Rate") != "8000" || len(r.body) == 0 {
		t.Errorf("speak mulaw: %v, %d bytes", r.header, len(r.body))
	}
	r = oas.check(t, "stream alaw", oasJSON("POST", api+"/voices/"+e.voice+"/stream", map[string]any{
		"text": "Hello there.", "output_format": "alaw", "sample_rate": 8000}, key...), true, 200)
	oas.checkSSE(t, r.body)
	r = oas.check(t, "stream timestamps", oasJSON("POST", api+"/voices/"+e.voice+"/stream", map[string]any{
		"text": "Hello there, word by word.", "timestamps": true}, key...), true, 200)
	oas.checkSSE(t, r.body)
	if !strings.Contains(string(r.body), "event: timestamps") {
		t.Errorf("stream with timestamps sent no timestamps event")
	}
	oas.check(t, "400 invalid_speed", oasJSON("POST", speak, map[string]any{"text": "Hi.", "speed": 5}, key...), false, 400)

	// Tokens: mint one, speak with it, then it is spent.
	r = oas.check(t, "create token", oasJSON("POST", api+"/tokens", map[string]any{
		"ttl_seconds": 60, "voice_ids": []string{e.voice}}, key...), true, 201)
	tok := bearerHdr(r.data(t)["token"].(string))
	oas.check(t, "speak with token", oasJSON("POST", speak, map[string]any{"text": "Hi."}, tok...), true, 200)
	oas.check(t, "token spent", oasJSON("POST", speak, map[string]any{"text": "Hi."}, tok...), true, 401)

	// Compatible speech, success and its error shape.
	compat := api + "/compat/audio/speech"
	bearer := bearerHdr(e.key)
	for _, f := range []string{"mp3", "opus", "flac", "wav", "pcm"} {
		oas.check(t, "compat "+f, oasJSON("POST", compat, map[string]any{
			"model": "service-v1", "voice": "en-us-linda", "input": "Hello.", "response_format": f, "speed": 1.25}, bearer...), true, 200)
	}
	r = oas.check(t, "compat sse", oasJSON("POST", compat, map[string]any{
		"model": "service-v1", "voice": "en-us-linda", "input": "Hello.", "response_format": "opus", "stream_format": "sse"},
		bearer...), true, 200)
	oas.checkCompatSSE(t, r.body)
	oas.check(t, "compat aac", oasJSON("POST", compat, map[string]any{
		"model": "service-v1", "voice": "en-us-linda", "input": "Hello.", "response_format": "aac"}, bearer...), false, 400)
	oas.check(t, "compat speed", oasJSON("POST", compat, map[string]any{
		"model": "service-v1", "voice": "en-us-linda", "input": "Hello.", "speed": 8}, bearer...), false, 400)
	oas.check(t, "compat models", oasReq("GET", api+"/compat/models", nil, bearer...), true, 200)
	for _, m := range []string{"service-v1", "tts-1"} {
		var got struct{ ID string }
		r := oas.check(t, "compat model "+m, oasReq("GET", api+"/compat/models/"+m, nil, bearer...), true, 200)
		if json.Unmarshal(r.body, &got); got.ID != m {
			t.Errorf("GET /compat/models/%s: id %q", m, got.ID)
		}
	}
	oas.check(t, "compat voices", oasReq("GET", api+"/compat/audio/voices", nil, key...), true, 200)
	oas.check(t, "compat voices no key", oasReq("GET", api+"/compat/audio/voices", nil), true, 401)
	oas.check(t, "compat unknown voice", oasJSON("POST", compat, map[string]any{
		"model": "service-v1", "voice": "nobody", "input": "Hello."}, bearer...), true, 404)
	oas.check(t, "compat no key", oasJSON("POST", compat, map[string]any{
		"model": "service-v1", "voice": "en-us-linda", "input": "Hello."}), true, 401)

	// The dialects' HTTP routes (their sockets are not in the document).
	oasDialects(t, oas, api, e)

	// The WebSocket handshake: a 101, and a GET that is not a handshake.
	oas.check(t, "websocket 101", oasWS(api+"/stream", key...), true, 101)
	oas.check(t, "websocket not a handshake", oasReq("GET", api+"/stream", nil, key...), true, 400)

	// Representative errors.
	oas.check(t, "400 invalid_sample_rate", oasJSON("POST", speak, map[string]any{"text": "Hi.", "sample_rate": 100}, key...), false, 400)
	oas.check(t, "400 invalid_page", oasReq("GET", api+"/voices?page_size=500", nil, key...), false, 400)
	oas.check(t, "401 no key", oasReq("GET", api+"/voices", nil), true, 401)
	oas.check(t, "401 bad key", oasReq("GET", api+"/voices", nil, "X-API-Key", "vsk_nope"), true, 401)
	oas.check(t, "404 voice", oasReq("GET", api+"/voices/"+strings.Repeat("0", 24), nil, key...), true, 404)
	oas.check(t, "404 job", oasReq("GET", api+"/jobs/"+strings.Repeat("0", 24), nil, key...), true, 404)
	oas.check(t, "413 payload_too_large", oasJSON("POST", speak, map[string]any{"text": strings.Repeat("a", 300<<10)}, key...), false, 413)

	ttsOnly := harness.Admin(t, srv.DB, "key", "create", "--workspace", e.ws, "--scopes", "tts")["key"].(string)
	oas.check(t, "403 insufficient_scope", oasReq("GET", api+"/voices", nil, keyHdr(ttsOnly)...), true, 403)

	poor := newEnv(t, srv, "free", "--allowance", "10", "--rps", "0")
	oas.check(t, "402 quota_exhausted", oasJSON("POST", api+"/voices/"+poor.voice+"/speak",
		map[string]any{"text": "This text is longer than ten characters."}, keyHdr(poor.key)...), true, 402)
	oas.check(t, "402 compat", oasJSON("POST", compat, map[string]any{
		"model": "service-v1", "voice": poor.voice, "input": "This text is longer than ten characters."},
		bearerHdr(poor.key)...), true, 402)

	noStream := newEnv(t, srv, "starter", "--streaming", "false")
	oas.check(t, "403 feature_disabled", oasJSON("POST", api+"/voices/"+noStream.voice+"/stream",
		map[string]any{"text": "Hi."}, keyHdr(noStream.key)...), true, 403)

	// 429: one request per second; a few back to back meet the limit.
	slow := newEnv(t, srv, "free", "--rps", "1")
	got429 := false
	for i := 0; i < 20 && !got429; i++ {
		r := oas.check(t, "429 rate_limited", oasReq("GET", api+"/voices?page_size=1", nil, keyHdr(slow.key)...), true, 200, 429)
		got429 = r.status == 429
	}
	if !got429 {
		t.Error("20 requests at 1 per second were never refused")
	}

	// The dashboard's session: usage, and keys made and revoked with it.
	oas.check(t, "usage with a key", oasReq("GET", api+"/usage", nil, keyHdr(ttsOnly)...), true, 200)
	sess := []string{"Cookie", dashboardCookie(t, srv, e.ws), "Origin", srv.URL}
	oas.check(t, "usage with the session", oasReq("GET", api+"/usage", nil, sess...), true, 200)
	oas.check(t, "list keys", oasReq("GET", api+"/keys", nil, sess...), true, 200)
	r = oas.check(t, "create key", oasJSON("POST", api+"/keys", map[string]any{
		"name": "docs", "scopes": []string{"tts"}, "expires_in_s": 3600}, sess...), true, 201)
	made := r.data(t)["id"].(string)
	oas.check(t, "create key, no scopes", oasJSON("POST", api+"/keys", map[string]any{"scopes": []string{}}, sess...), false, 400)
	oas.check(t, "create key with a key", oasJSON("POST", api+"/keys", map[string]any{"scopes": []string{"tts"}}, key...), true, 403)
	oas.check(t, "create key, other origin", oasJSON("POST", api+"/keys", map[string]any{"scopes": []string{"tts"}},
		sess[0], sess[1], "Origin", "http://elsewhere.example"), true, 403)
	oas.check(t, "revoke key", oasReq("DELETE", api+"/keys/"+made, nil, sess...), true, 200)
	oas.check(t, "revoke unknown key", oasReq("DELETE", api+"/keys/"+strings.Repeat("0", 24), nil, sess...), true, 404)

	oas.check(t, "delete voice", oasReq("DELETE", api+"/voices/"+remixID, nil, key...), true, 200)
	oas.check(t, "delete again", oasReq("DELETE", api+"/voices/"+remixID, nil, key...), true, 404)
	t.Logf("%d exchanges validated against openapi.yaml", oas.n)
}

// oasDialects checks exchanges of the Cartesia, ElevenLabs and Deepgram
// routes: successes, their SSE events, and each dialect's error object.
func oasDialects(t *testing.T, oas *oasSpec, api string, e *env) {
	t.Helper()
	cart := api + "/compat/cartesia"
	xkey := keyHdr(e.key)
	cartReq := func(container, encoding string) map[string]any {
		format := map[string]any{"container": container, "sample_rate": 16000}
		if encoding != "" { // mp3 has none
			format["encoding"] = encoding
		}
		return map[string]any{"model_id": "sonic-3", "transcript": "Hello there.", "context_id": "c1",
			"voice": map[string]any{"mode": "id", "id": e.voice}, "output_format": format}
	}
	for _, f := range [][2]string{{"raw", "pcm_s16le"}, {"wav", "pcm_s16le"}, {"mp3", ""}} {
		oas.check(t, "cartesia bytes "+f[0], oasJSON("POST", cart+"/tts/bytes", cartReq(f[0], f[1]), xkey...), true, 200)
	}
	sse := cartReq("raw", "pcm_s16le")
	sse["add_timestamps"] = true
	r := oas.check(t, "cartesia sse", oasJSON("POST", cart+"/tts/sse", sse, bearerHdr(e.key)...), true, 200)
	oas.checkEvents(t, r.body, map[string]string{"chunk": "CartesiaSSEChunk", "timestamps": "CartesiaSSETimestamps",
		"done": "CartesiaSSEDone", "error": "CartesiaSSEError"}, "done")
	oas.check(t, "cartesia voices", oasReq("GET", cart+"/voices?limit=2&is_owner=false", nil, xkey...), true, 200)
	oas.check(t, "cartesia voices limit", oasReq("GET", cart+"/voices?limit=500", nil, xkey...), false, 400)
	oas.check(t, "cartesia no key", oasJSON("POST", cart+"/tts/bytes", cartReq("raw", "pcm_s16le")), true, 401)
	oas.check(t, "cartesia bad format", oasJSON("POST", cart+"/tts/bytes", cartReq("flac", "pcm_s16le"), xkey...), false, 400)
	bad := cartReq("raw", "pcm_s16le")
	bad["voice"] = map[string]any{"mode": "id", "id": "nobody-at-all"}
	oas.check(t, "cartesia unknown voice", oasJSON("POST", cart+"/tts/bytes", bad, xkey...), true, 400, 404)

	el := api + "/compat/elevenlabs/v1"
	xi := []string{"xi-api-key", e.key}
	tts := el + "/text-to-speech/" + e.voice
	body := map[string]any{"text": "Hello there.", "model_id": "eleven_flash_v2_5", "voice_settings": map[string]any{"speed": 1.1}}
	oas.check(t, "elevenlabs speech", oasJSON("POST", tts+"?output_format=pcm_16000", body, xi...), true, 200)
	oas.check(t, "elevenlabs stream", oasJSON("POST", tts+"/stream?output_format=ulaw_8000", body, xi...), true, 200)
	oas.check(t, "elevenlabs timestamps", oasJSON("POST", tts+"/with-timestamps", body, xi...), true, 200)
	r = oas.check(t, "elevenlabs stream timestamps", oasJSON("POST", tts+"/stream/with-timestamps?output_format=pcm_24000", body, xi...), true, 200)
	oas.checkLines(t, r.body, "ElevenLabsTimestamped")
	oas.check(t, "elevenlabs voices", oasReq("GET", el+"/voices", nil, xi...), true, 200)
	oas.check(t, "elevenlabs models", oasReq("GET", el+"/models", nil, xi...), true, 200)
	oas.check(t, "elevenlabs subscription", oasReq("GET", el+"/user/subscription", nil, xi...), true, 200)
	oas.check(t, "elevenlabs no key", oasReq("GET", el+"/voices", nil), true, 401)
	oas.check(t, "elevenlabs bad format", oasJSON("POST", tts+"?output_format=aac_44100", body, xi...), false, 400)
	oas.check(t, "elevenlabs unknown voice", oasJSON("POST", el+"/text-to-speech/nobody-at-all", body, xi...), true, 400, 404)

	dg := api + "/compat/deepgram/v1/speak"
	tok := []string{"Authorization", "Token " + e.key}
	text := map[string]any{"text": "Hello there."}
	for _, q := range []string{"encoding=linear16&sample_rate=16000", "encoding=mulaw&container=none",
		"encoding=mp3", "encoding=opus&container=ogg", "encoding=flac"} {
		oas.check(t, "deepgram "+q, oasJSON("POST", dg+"?model="+e.voice+"&"+q, text, tok...), true, 200)
	}
	oas.check(t, "deepgram aac", oasJSON("POST", dg+"?model="+e.voice+"&encoding=aac", text, tok...), true, 400)
	oas.check(t, "deepgram rate", oasJSON("POST", dg+"?model="+e.voice+"&sample_rate=100", text, tok...), false, 400)
	oas.check(t, "deepgram unknown model", oasJSON("POST", dg+"?model=aura-nobody-en", text, tok...), true, 400)
	oas.check(t, "deepgram no key", oasJSON("POST", dg+"?model="+e.voice, text), true, 401)
}

// checkEvents validates the data of every `event:` of an SSE body against
// the schema its event names, and requires the last to be last.
func (s *oasSpec) checkEvents(t *testing.T, body []byte, schemas map[string]string, last string) {
	t.Helper()
	var names []string
	event := ""
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			event = v
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		s.checkJSON(t, "SSE "+event, schemas[event], []byte(data))
		names = append(names, event)
	}
	if len(names) < 2 || names[len(names)-1] != last {
		t.Errorf("SSE events %v: want ..., %s", names, last)
	}
}

// checkLines validates each non-empty line of body against schema.
func (s *oasSpec) checkLines(t *testing.T, body []byte, schema string) {
	t.Helper()
	n := 0
	for _, line := range bytes.Split(body, []byte("\n")) {
		if len(bytes.TrimSpace(line)) > 0 {
			s.checkJSON(t, "line", schema, line)
			n++
		}
	}
	if n == 0 {
		t.Errorf("no %s line", schema)
	}
}

// checkJSON validates data against the named component schema.
func (s *oasSpec) checkJSON(t *testing.T, what, schema string, data []byte) {
	t.Helper()
	ref := s.doc.Components.Schemas[schema]
	if ref == nil {
		t.Fatalf("%s: no schema %q in openapi.yaml", what, schema)
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("%s: not JSON: %v", what, err)
	}
	if err := ref.Value.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
		t.Errorf("%s does not match %s: %v", what, schema, err)
	}
}

// dashboardCookie signs in to the dashboard of ws with a login link and
// returns the session cookie as a Cookie header value.
func dashboardCookie(t *testing.T, srv *harness.Server, ws string) string {
	t.Helper()
	link := harness.Admin(t, srv.DB, "login-link", "--workspace", ws)["url"].(string)
	token := strings.SplitN(link, "token=", 2)[1]
	req, _ := http.NewRequest("POST", srv.URL+"/dashboard/login", strings.NewReader("token="+token))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", srv.URL)
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	for _, ck := range res.Cookies() {
		if ck.Name == "voicesvc_session" {
			return ck.Name + "=" + ck.Value
		}
	}
	t.Fatalf("sign-in answered %d without a session cookie", res.StatusCode)
	return ""
}

// oasSpec is the served openapi.yaml with a router over the server's address.
type oasSpec struct {
	doc    *openapi3.T
	router routers.Router
	n      int // exchanges checked
}

func oasLoad(t *testing.T, srv *harness.Server) *oasSpec {
	t.Helper()
	r := mustCall(t, "GET", srv.URL+"/openapi.yaml", nil)
	if r.status != 200 {
		t.Fatalf("GET /openapi.yaml: %d", r.status)
	}
	doc, err := openapi3.NewLoader().LoadFromData(r.body)
	if err != nil {
		t.Fatalf("openapi.yaml does not load: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.yaml is not valid OpenAPI: %v", err)
	}
	// Every server URL is "{base}...": point it at this server (the router
	// takes variables only inside the host or the path).
	setBase := func(ss openapi3.Servers) {
		for _, s := range ss {
			s.URL = strings.ReplaceAll(s.URL, "{base}", srv.URL)
			s.Variables = nil
		}
	}
	setBase(doc.Servers)
	for _, item := range doc.Paths.Map() {
		setBase(item.Servers)
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return &oasSpec{doc: doc, router: router}
}

// check sends r, validates the request (wantValid: whether the document
// should accept it) and the response, and requires one of the statuses.
func (s *oasSpec) check(t *testing.T, what string, r *http.Request, wantValid bool, statuses ...int) *resp {
	t.Helper()
	s.n++
	body, _ := io.ReadAll(r.Body)
	route, params, err := s.router.FindRoute(r)
	if err != nil {
		t.Fatalf("%s: %s %s is not in openapi.yaml: %v", what, r.Method, r.URL, err)
	}
	opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc,
		IncludeResponseStatus: true, MultiError: true}
	in := &openapi3filter.RequestValidationInput{Request: r.Clone(context.Background()), PathParams: params,
		Route: route, Options: opts}
	in.Request.Body = io.NopCloser(bytes.NewReader(body))
	err = openapi3filter.ValidateRequest(context.Background(), in)
	switch {
	case wantValid && err != nil:
		t.Errorf("%s: the request does not match openapi.yaml: %v", what, err)
	case !wantValid && err == nil:
		t.Errorf("%s: openapi.yaml accepts a request the server refuses", what)
	}

	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	var hr *http.Response
	if len(body) > oasAnnounceOver {
		hr, err = oasAnnounce(r)
	} else {
		hr, err = client.Do(r)
	}
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	var got []byte
	if hr.StatusCode != http.StatusSwitchingProtocols {
		got, err = io.ReadAll(hr.Body)
		if err != nil {
			t.Fatalf("%s: reading the body: %v", what, err)
		}
	}
	hr.Body.Close()
	res := &resp{status: hr.StatusCode, header: hr.Header, body: got}
	if !oasHasStatus(statuses, hr.StatusCode) {
		t.Fatalf("%s: status %d, want %v: %.300s", what, hr.StatusCode, statuses, got)
	}
	err = openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: hr.StatusCode, Header: hr.Header,
		Body: io.NopCloser(bytes.NewReader(got)), Options: opts,
	})
	if err != nil {
		t.Errorf("%s: the %d response does not match openapi.yaml: %v\nbody: %.300s", what, hr.StatusCode, err, got)
	}
	return res
}

// checkSSE validates every event of a stream against the event schemas.
func (s *oasSpec) checkSSE(t *testing.T, body []byte) {
	t.Helper()
	schemas := map[string]string{"start": "SSEStart", "chunk": "SSEChunk", "timestamps": "SSETimestamps", "done": "SSEDone", "error": "SSEError"}
	var names []string
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			ref := s.doc.Components.Schemas[schemas[event]]
			if ref == nil {
				t.Fatalf("SSE event %q has no schema in openapi.yaml", event)
			}
			var v any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &v); err != nil {
				t.Fatalf("SSE %s data is not JSON: %v", event, err)
			}
			if err := ref.Value.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
				t.Errorf("SSE %s event does not match %s: %v", event, schemas[event], err)
			}
			names = append(names, event)
		}
	}
	if len(names) < 3 || names[0] != "start" || names[len(names)-1] != "done" {
		t.Errorf("SSE events %v: want start, chunk..., done", names)
	}
}

// checkCompatSSE validates the compatible endpoint's events (data lines
// only): deltas, then one done.
func (s *oasSpec) checkCompatSSE(t *testing.T, body []byte) {
	t.Helper()
	var names []string
	for _, line := range strings.Split(string(body), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			if line != "" {
				t.Fatalf("compat SSE: unexpected line %.80q", line)
			}
			continue
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(data), &v); err != nil {
			t.Fatalf("compat SSE data is not JSON: %v", err)
		}
		name := map[any]string{"speech.audio.delta": "CompatSSEDelta", "speech.audio.done": "CompatSSEDone"}[v["type"]]
		ref := s.doc.Components.Schemas[name]
		if ref == nil {
			t.Fatalf("compat SSE event %v has no schema in openapi.yaml", v["type"])
		}
		if err := ref.Value.VisitJSON(map[string]any(v), openapi3.EnableJSONSchema2020()); err != nil {
			t.Errorf("compat SSE event does not match %s: %v", name, err)
		}
		names = append(names, name)
	}
	if len(names) < 2 || names[len(names)-1] != "CompatSSEDone" {
		t.Errorf("compat SSE events %v: want deltas, then done", names)
	}
}

// oasAnnounceOver: a body larger than the JSON limit is refused from its
// Content-Length before it is read, and the server closes the connection;
// a client that writes the whole body meets a broken pipe before it reads
// the answer. Such a request announces its length and sends no body.
const oasAnnounceOver = 256 << 10

func oasAnnounce(r *http.Request) (*http.Response, error) {
	conn, err := net.Dial("tcp", r.URL.Host)
	if err != nil {
		return nil, err
	}
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n", r.Method, r.URL.RequestURI(), r.URL.Host, r.ContentLength)
	r.Header.Write(&b)
	b.WriteString("\r\n")
	if _, err := conn.Write(b.Bytes()); err != nil {
		conn.Close()
		return nil, err
	}
	hr, err := http.ReadResponse(bufio.NewReader(conn), r)
	if err != nil {
		conn.Close()
		return nil, err
	}
	body, err := io.ReadAll(hr.Body)
	conn.Close()
	hr.Body = io.NopCloser(bytes.NewReader(body))
	return hr, err
}

func oasReq(method, url string, body []byte, headers ...string) *http.Request {
	r, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		panic(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Set(headers[i], headers[i+1])
	}
	return r
}

func oasJSON(method, url string, v any, headers ...string) *http.Request {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	r := oasReq(method, url, b, headers...)
	r.Header.Set("Content-Type", "application/json")
	return r
}

// oasUpload is a multipart enroll or clone request with clip as its file.
func oasUpload(url string, fields [][2]string, clip []byte, headers ...string) *http.Request {
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	for _, f := range fields {
		w.WriteField(f[0], f[1])
	}
	fw, _ := w.CreateFormFile("file", "clip.wav")
	fw.Write(clip)
	w.Close()
	r := oasReq("POST", url, buf.Bytes(), headers...)
	r.Header.Set("Content-Type", w.FormDataContentType())
	return r
}

// oasWS is a WebSocket handshake; the 101's body is the socket, closed
// unread by check.
func oasWS(url string, headers ...string) *http.Request {
	r := oasReq("GET", url, nil, headers...)
	var nonce [16]byte
	r.Header.Set("Connection", "Upgrade")
	r.Header.Set("Upgrade", "websocket")
	r.Header.Set("Sec-WebSocket-Version", "13")
	r.Header.Set("Sec-WebSocket-Key", base64.StdEncoding.EncodeToString(nonce[:]))
	r.Header.Set("Sec-WebSocket-Protocol", "service.v1")
	return r
}

// oasTone is seconds of a 220 Hz tone as 16-bit WAV: audio, but no speech,
// so its clone job fails (clip_unusable), which shows the job's error too.
func oasTone(seconds int) []byte {
	const rate = 22050
	n := rate * seconds
	b := codec.AppendWAVHeader(nil, rate, 16, false, 2*n)
	for i := 0; i < n; i++ {
		v := int16(8000 * math.Sin(2*math.Pi*220*float64(i)/rate))
		b = binary.LittleEndian.AppendUint16(b, uint16(v))
	}
	return b
}

func oasHasStatus(list []int, v int) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
