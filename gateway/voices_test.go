package gateway

import (
	"context"
	"sort"
	"strings"
	"testing"

	"voicesvc/control"
	"voicesvc/synth"
)

// voiceFields are the only fields a voice may show (docs/api.md#voice-object).
var voiceFields = map[string]bool{
	"id": true, "name": true, "description": true, "status": true, "clone_method": true,
	"visibility": true, "primary_language": true, "labels": true, "settings": true,
	"sample_audio_url": true, "base_voice_id": true, "alias": true, "org_id": true,
	"created_at": true, "updated_at": true,
	"workspace_aliases": true, // the asking workspace's names for it (docs/api.md#voice-aliases)
}

func checkVoiceFields(t *testing.T, v map[string]any) {
	t.Helper()
	for k := range v {
		if !voiceFields[k] {
			t.Errorf("voice has field %q", k)
		}
	}
	if id, _ := v["id"].(string); !control.ValidID(id) {
		t.Errorf("voice id %q", v["id"])
	}
}

func TestVoiceLifecycle(t *testing.T) {
	ts := newTestServer(t, "")
	if err := synth.SeedCatalog(context.Background(), ts.store, nil); err != nil {
		t.Fatal(err)
	}

	// Create: a draft, settings absent when not configured.
	r := ts.do("POST", "/voices", ts.key, map[string]any{
		"name": " Narrator ", "consent": true, "description": "warm <b>", "primary_language": "EN-us",
		"labels": []map[string]string{{"key": "accent", "value": "american"}}, "unknown": 1,
	})
	v := r.data(t, 201)["voice"].(map[string]any)
	checkVoiceFields(t, v)
	want := map[string]any{"name": "Narrator", "status": "draft", "clone_method": "instant",
		"visibility": "private", "primary_language": "en-US", "org_id": ts.ws.ID, "description": "warm <b>"}
	for k, w := range want {
		if v[k] != w {
			t.Errorf("%s = %v, want %v", k, v[k], w)
		}
	}
	for _, k := range []string{"settings", "alias", "base_voice_id", "sample_audio_url"} {
		if _, ok := v[k]; ok {
			t.Errorf("unset %s shown", k)
		}
	}
	id := v["id"].(string)

	// Get, and the list: own voices first, then the public catalog.
	got := ts.do("GET", "/voices/"+id, ts.key, nil).data(t, 200)["voice"].(map[string]any)
	if got["name"] != "Narrator" || got["labels"].([]any)[0].(map[string]any)["value"] != "american" {
		t.Errorf("get: %v", got)
	}
	list := ts.do("GET", "/voices?page_size=3", ts.key, nil).data(t, 200)
	voices := list["voices"].([]any)
	if len(voices) != 3 || voices[0].(map[string]any)["id"] != id {
		t.Fatalf("list: %v", list)
	}
	pub := voices[1].(map[string]any)
	checkVoiceFields(t, pub)
	if pub["visibility"] != "public" || pub["status"] != "ready" || pub["alias"] == nil || pub["org_id"] != synth.CatalogWorkspaceID {
		t.Errorf("catalog voice: %v", pub)
	}
	wantTotal := float64(1 + len(synth.FallbackCatalog))
	if list["total"] != wantTotal || list["has_more"] != true || list["page"] != 1.0 || list["page_size"] != 3.0 {
		t.Errorf("page fields: %v", list)
	}
	last := ts.do("GET", "/voices?page=4&page_size=3", ts.key, nil).data(t, 200)
	if last["has_more"] != false || len(last["voices"].([]any)) != 2 {
		t.Errorf("last page: %v", last)
	}
	pubOnly := ts.do("GET", "/voices?visibility=public&language=hi", ts.key, nil).data(t, 200)
	if pubOnly["total"] != 1.0 {
		t.Errorf("filters: %v", pubOnly)
	}
	// A public voice reads like an own one.
	ts.do("GET", "/voices/"+pub["id"].(string), ts.key, nil).data(t, 200)

	// Patch: settings appear once configured, and null clears them.
	p := ts.do("PATCH", "/voices/"+id, ts.key, map[string]any{
		"name": "Renamed", "visibility": "org",
		"settings": map[string]any{"speed": 1.5, "stability": 0, "use_speaker_boost": true, "emotion": "calm",
			"engine_params": map[string]any{"k": "v"}},
	}).data(t, 200)["voice"].(map[string]any)
	st, _ := p["settings"].(map[string]any)
	if p["name"] != "Renamed" || p["visibility"] != "org" || st["speed"] != 1.5 || st["stability"] != 0.0 ||
		st["emotion"] != "calm" || st["engine_params"].(map[string]any)["k"] != "v" {
		t.Errorf("patch: %v", p)
	}
	if p["description"] != "warm <b>" {
		t.Errorf("patch dropped description: %v", p)
	}
	// The cached voice was invalidated by the patch.
	got = ts.do("GET", "/voices/"+id, ts.key, nil).data(t, 200)["voice"].(map[string]any)
	if got["name"] != "Renamed" {
		t.Errorf("stale after patch: %v", got)
	}
	cleared := ts.do("PATCH", "/voices/"+id, ts.key, `{"settings":null}`).data(t, 200)["voice"].(map[string]any)
	if _, ok := cleared["settings"]; ok {
		t.Errorf("settings not cleared: %v", cleared)
	}

	// Delete, then it is gone.
	d := ts.do("DELETE", "/voices/"+id, ts.key, nil).data(t, 200)
	if d["id"] != id || d["deleted"] != true || len(d) != 2 {
		t.Errorf("delete: %v", d)
	}
	ts.do("GET", "/voices/"+id, ts.key, nil).failure(t, 404, control.ENotFound)
	ts.do("DELETE", "/voices/"+id, ts.key, nil).failure(t, 404, control.ENotFound)
}

func TestRemix(t *testing.T) {
	ts := newTestServer(t, "")
	ctx := context.Background()
	if err := synth.SeedCatalog(ctx, ts.store, nil); err != nil {
		t.Fatal(err)
	}
	base := synth.FallbackCatalog[len(synth.FallbackCatalog)-1] // hi-f1
	r := ts.do("POST", "/voices", ts.key, map[string]any{
		"name": "Remix", "consent": true, "base_voice_id": synth.CatalogVoiceID(base.Alias),
		"settings": map[string]any{"pitch": 2},
	})
	v := r.data(t, 201)["voice"].(map[string]any)
	checkVoiceFields(t, v)
	if v["status"] != "ready" || v["clone_method"] != "remix" || v["base_voice_id"] != synth.CatalogVoiceID(base.Alias) ||
		v["primary_language"] != "hi" || v["settings"].(map[string]any)["pitch"] != 2.0 {
		t.Errorf("remix: %v", v)
	}
	stored, err := ts.store.GetVoice(ctx, v["id"].(string))
	if err != nil {
		t.Fatal(err)
	}
	if string(stored.Profile) != string(base.Profile) || stored.ConsentAt == 0 || stored.ConsentKeyID == "" {
		t.Errorf("remix profile %q consent %d/%q", stored.Profile, stored.ConsentAt, stored.ConsentKeyID)
	}
}

func TestSeedCatalogIsStable(t *testing.T) {
	ts := newTestServer(t, "")
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		if err := synth.SeedCatalog(ctx, ts.store, nil); err != nil {
			t.Fatal(err)
		}
	}
	vs, total, err := ts.store.ListVoices(ctx, control.VoiceFilter{WorkspaceID: ts.ws.ID, Page: 1, PageSize: 100})
	if err != nil || total != len(synth.FallbackCatalog) {
		t.Fatalf("total %d err %v", total, err)
	}
	var aliases []string
	for _, v := range vs {
		if v.ID != synth.CatalogVoiceID(v.Alias) || !synth.ValidAlias(v.Alias) || len(v.Labels) == 0 {
			t.Errorf("catalog voice %+v", v)
		}
		aliases = append(aliases, v.Alias)
	}
	if !sort.StringsAreSorted(aliases) {
		t.Errorf("catalog order %v", aliases)
	}
}

func TestJobs(t *testing.T) {
	ts := newTestServer(t, "")
	ctx := context.Background()
	v := &control.Voice{ID: control.NewID(), OrgID: ts.ws.ID, Name: "j", Visibility: "private"}
	job := &control.Job{}
	if err := ts.store.StartEnrollment(ctx, v, true, job, &control.Clip{Data: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	d := ts.do("GET", "/jobs/"+job.ID, ts.key, nil).data(t, 200)
	want := map[string]any{"id": job.ID, "voice_id": v.ID, "org_id": ts.ws.ID, "job_type": job.JobType,
		"status": "pending", "progress": 0.0}
	if len(d) != len(want) {
		t.Errorf("job fields: %v", d)
	}
	for k, w := range want {
		if d[k] != w {
			t.Errorf("%s = %v, want %v", k, d[k], w)
		}
	}

	ts.waitLive()
	ts.do("GET", "/voices/"+v.ID, ts.key, nil).data(t, 200) // cached as processing
	claimed, _, err := ts.store.ClaimJob(ctx, "worker", 60e9)
	if err != nil {
		t.Fatal(err)
	}
	jerr := control.JobError{Code: "clip_unusable", Message: "only 2.1 s of speech"}
	if err := ts.store.FailJob(ctx, claimed.ID, "worker", jerr); err != nil {
		t.Fatal(err)
	}
	d = ts.do("GET", "/jobs/"+job.ID, ts.key, nil).data(t, 200)
	e, _ := d["error"].(map[string]any)
	if d["status"] != "failed" || e["code"] != "clip_unusable" || !strings.Contains(e["message"].(string), "2.1") {
		t.Errorf("failed job: %v", d)
	}
	// The voice's failure reached the cached copy through the change feed
	// or the server's own invalidation: the voice reads as failed.
	if _, ok := waitFor(5e9, func() bool {
		r := ts.do("GET", "/voices/"+v.ID, ts.key, nil)
		return r.status == 200 && r.json["data"].(map[string]any)["voice"].(map[string]any)["status"] == "failed"
	}); !ok {
		t.Errorf("voice status never became failed")
	}
}
