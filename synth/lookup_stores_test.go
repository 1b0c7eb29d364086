package synth_test

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"

	"voicesvc/control"
	"voicesvc/control/postgres"
	"voicesvc/control/sqlite"
	"voicesvc/engine/reference"
	"voicesvc/synth"
)

// The core's voice lookup over both real stores: every rule of
// docs/api.md#voice-aliases (id, then workspace alias, then
// catalog alias; shadowing; other workspaces; a token's voice_ids on the
// id a name resolves to; readiness; id-shaped and taken aliases; aliases
// deleted with their voice). The same rules run over the fake store in
// service_test.go and alias_test.go.
func TestLookupOnStores(t *testing.T) {
	stores := map[string]func(t *testing.T) control.Store{
		"sqlite": func(t *testing.T) control.Store {
			db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "voicesvc.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return db
		},
		"postgres": func(t *testing.T) control.Store {
			db, err := postgres.Open(context.Background(), pgSchema(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return db
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) { lookupRules(t, open(t)) })
	}
}

func lookupRules(t *testing.T, st control.Store) {
	ctx := context.Background()
	eng := reference.New()
	if err := synth.SeedCatalog(ctx, st, eng); err != nil {
		t.Fatal(err)
	}
	catAlias := eng.Catalog()[0].Alias
	catID := synth.CatalogVoiceID(catAlias)
	ws := func(name string) string {
		w := &control.Workspace{Name: name, Plan: "pro"}
		if err := st.CreateWorkspace(ctx, w); err != nil {
			t.Fatal(err)
		}
		return w.ID
	}
	a, b := ws("a"), ws("b")
	voice := func(org, status string) string {
		v := &control.Voice{OrgID: org, Name: "v", Status: status, CloneMethod: "instant", Visibility: "private",
			PrimaryLanguage: "en", Profile: reference.MarshalProfile(200)}
		if err := st.CreateVoice(ctx, v); err != nil {
			t.Fatal(err)
		}
		return v.ID
	}
	own, free, draft, theirs := voice(a, control.VoiceReady), voice(a, control.VoiceReady), voice(a, control.VoiceDraft),
		voice(b, control.VoiceReady)
	svc, err := synth.NewService(synth.Deps{Store: st, Engine: eng, Meter: control.NewMeter(st, control.BillingOff)})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	pa, pb := &control.Principal{WorkspaceID: a}, &control.Principal{WorkspaceID: b}
	token := func(p *control.Principal, ids ...string) *control.Principal {
		q := *p
		q.Token = &control.AccessToken{Hash: []byte("t"), VoiceIDs: ids}
		return &q
	}
	for _, set := range []struct {
		p       *control.Principal
		voice   string
		aliases []string
		code    string
	}{
		{pa, own, []string{"alloy", catAlias}, ""},         // catAlias: shadows the catalog's for a
		{pa, catID, []string{"anna"}, ""},                  // a catalog voice, named by a
		{pa, draft, []string{"drafty"}, ""},                //
		{pb, theirs, []string{"alloy"}, ""},                // the same name in another workspace
		{pa, free, []string{"alloy"}, control.EAliasTaken}, // taken by own
		{pa, free, []string{"0123456789abcdef01234567"}, control.EInvalidRequest},
		{pa, free, []string{"no spaces"}, control.EInvalidRequest},
		{pa, theirs, []string{"x"}, control.ENotFound}, // not a voice a may use
	} {
		if _, err := svc.SetAliases(ctx, set.p, set.voice, set.aliases); control.ErrorCode(err) != set.code {
			t.Fatalf("SetAliases(%v): %v, want %q", set.aliases, err, set.code)
		}
	}
	for _, tc := range []struct {
		name      string
		p         *control.Principal
		ref, want string
		code      string
	}{
		{"id", pa, own, own, ""},
		{"workspace alias", pa, "alloy", own, ""},
		{"the other workspace's own alias", pb, "alloy", theirs, ""},
		{"workspace alias of a catalog voice", pa, "anna", catID, ""},
		{"catalog alias", pb, catAlias, catID, ""},
		{"workspace alias shadows the catalog alias", pa, catAlias, own, ""},
		{"another workspace's alias", pb, "anna", "", control.ENotFound},
		{"a token's voice_ids on the resolved id", token(pa, own), "alloy", own, ""},
		{"a token without the resolved id", token(pa, free), "alloy", "", control.EVoiceNotAllowed},
		{"alias of a draft voice", pa, "drafty", "", control.EVoiceNotReady},
		{"unknown name", pa, "nova", "", control.ENotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := svc.Voice(ctx, tc.p, tc.ref)
			if control.ErrorCode(err) != tc.code || err == nil && v.ID != tc.want {
				t.Fatalf("Voice(%q): %v %v, want %s %q", tc.ref, v, err, tc.want, tc.code)
			}
		})
	}
	// A refused set changed nothing; deleting a voice deletes its aliases.
	if got, err := svc.Aliases(ctx, pa, free); err != nil || len(got) != 0 {
		t.Fatalf("aliases of free after refused sets: %v %v", got, err)
	}
	if err := st.DeleteVoice(ctx, a, own); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Voice(ctx, pa, "alloy"); control.ErrorCode(err) != control.ENotFound {
		t.Fatalf("alias of a deleted voice: %v, want not_found", err)
	}
	if v, err := svc.Voice(ctx, pa, catAlias); err != nil || v.ID != catID {
		t.Fatalf("once the shadowing voice is gone, the catalog alias: %v %v", v, err)
	}
}

// pgSchema is a DSN on a fresh schema of VOICESVC_TEST_PG, dropped at the
// end; unset, the test skips (and fails in CI, where Postgres is required).
func pgSchema(t *testing.T) string {
	dsn := os.Getenv("VOICESVC_TEST_PG")
	if dsn == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("VOICESVC_TEST_PG is unset but CI=true: the Postgres tests are required in CI")
		}
		t.Skip("VOICESVC_TEST_PG is unset; set it to run the Postgres lookup tests")
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	schema := "synth_" + control.NewID()
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if c, err := pgx.Connect(ctx, dsn); err == nil {
			c.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
			c.Close(ctx)
		}
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
