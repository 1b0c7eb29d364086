package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"voicesvc/control"
	"voicesvc/synth"
)

// adminCommand is one `voicesvc admin <noun> <verb>`: it defines its flags on
// fs and returns what runs once they are parsed and the store is open. The
// result is printed as one JSON object on stdout.
type adminCommand func(fs *flag.FlagSet) func(ctx context.Context, store control.Store) (any, error)

var adminCommands = map[string]adminCommand{
	"workspace create": adminWorkspaceCreate,
	"workspace update": adminWorkspaceUpdate,
	"workspace list":   adminWorkspaceList,
	"key create":       adminKeyCreate,
	"key revoke":       adminKeyRevoke,
	"key list":         adminKeyList,
	"voice list":       adminVoiceList,
	"login-link":       adminLoginLink,
}

const adminUsage = `usage: voicesvc admin <command> [flags]   (voicesvc admin <command> --help for its flags)

commands (each prints one JSON object on stdout):
  workspace create --name NAME [--plan PLAN]
  workspace update --id ID [--plan P] [--billing B] [--credits N] ...
  workspace list
  key create --workspace ID [--scopes LIST] [--expires-in D]
  key revoke --id KEY_ID
  key list --workspace ID
  voice list --workspace ID
  login-link --workspace ID [--ttl D] [--base-url URL]

Every command takes --db URL (else VOICESVC_DB, else sqlite://./data/voicesvc.db) and
says on stderr which store it opened. A SQLite file that does not exist yet is created
only by "workspace create" or with --create; any other command refuses it, so that a
command run from the wrong directory does not answer from a new, empty store.
`

func runAdmin(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) < 1 {
		fmt.Fprint(stderr, adminUsage)
		return 2
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, adminUsage)
		return 0
	}
	// Commands are a noun and a verb, except login-link, which is one word.
	name, rest := args[0], args[1:]
	if _, ok := adminCommands[name]; !ok && len(args) >= 2 && !strings.HasPrefix(args[1], "-") {
		name, rest = args[0]+" "+args[1], args[2:]
	}
	cmd, ok := adminCommands[name]
	if !ok {
		fmt.Fprintf(stderr, "voicesvc admin: unknown command %q\n%s", name, adminUsage)
		return 2
	}
	fs := flag.NewFlagSet("voicesvc admin "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	db := fs.String("db", "", "store URL (sqlite://PATH or postgres://...); env VOICESVC_DB")
	create := fs.Bool("create", name == "workspace create", "create the SQLite file when it does not exist")
	exec := cmd(fs)
	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "voicesvc admin %s: unexpected argument %q\n", name, fs.Arg(0))
		return 2
	}
	url := dbURL(*db)
	where, err := adminStoreCheck(url, *create)
	if err != nil {
		fmt.Fprintf(stderr, "voicesvc admin %s: %v\n", name, err)
		return 1
	}
	fmt.Fprintf(stderr, "voicesvc admin: store %s\n", where)
	store, err := openStore(ctx, url, defaultStoreTimeout)
	if err != nil {
		fmt.Fprintf(stderr, "voicesvc admin %s: %v\n", name, err)
		return 1
	}
	defer store.Close()
	out, err := exec(ctx, store)
	if err != nil {
		fmt.Fprintf(stderr, "voicesvc admin %s: %v\n", name, err)
		return 1
	}
	if err := json.NewEncoder(stdout).Encode(out); err != nil {
		fmt.Fprintf(stderr, "voicesvc admin %s: %v\n", name, err)
		return 1
	}
	return 0
}

// adminStoreCheck says which store url names, for the line on stderr, and
// refuses a SQLite file that does not exist unless create is set.
func adminStoreCheck(url string, create bool) (string, error) {
	path, ok := strings.CutPrefix(url, "sqlite://")
	if !ok {
		return redactDSN(url), nil
	}
	abs := path
	if a, err := filepath.Abs(path); err == nil {
		abs = a
	}
	if _, err := os.Stat(path); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("--db %s: %v", url, err)
		}
		if !create {
			return "", fmt.Errorf("no store at %s (--db %s): give --db (or VOICESVC_DB) the server's store, "+
				"or --create to make a new, empty one", abs, url)
		}
		return "sqlite://" + abs + " (new)", nil
	}
	return "sqlite://" + abs, nil
}

// workspaceLister is a store that lists every workspace (SQLite and
// Postgres do; the admin CLI alone needs it).
type workspaceLister interface {
	ListWorkspaces(ctx context.Context) ([]*control.Workspace, error)
}

func adminWorkspaceList(fs *flag.FlagSet) func(context.Context, control.Store) (any, error) {
	return func(ctx context.Context, store control.Store) (any, error) {
		l, ok := store.(workspaceLister)
		if !ok {
			return nil, errors.New("this store cannot list workspaces")
		}
		ws, err := l.ListWorkspaces(ctx)
		if err != nil {
			return nil, err
		}
		type item struct {
			ID        string `json:"id"`
			Name      string `json:"name"`
			Plan      string `json:"plan"`
			Billing   string `json:"billing,omitempty"`
			CreatedAt int64  `json:"created_at"`
		}
		out := []item{}
		for _, w := range ws {
			if w.ID == synth.CatalogWorkspaceID {
				continue // holds the public catalog voices, not a customer's
			}
			out = append(out, item{w.ID, w.Name, w.Plan, w.Billing, w.CreatedAt})
		}
		return map[string]any{"workspaces": out}, nil
	}
}

// requireWorkspace: --workspace is given and names a workspace.
func requireWorkspace(ctx context.Context, store control.Store, ws string) error {
	if ws == "" {
		return errors.New("--workspace is required")
	}
	_, err := store.GetWorkspace(ctx, ws)
	return err
}

func adminKeyList(fs *flag.FlagSet) func(context.Context, control.Store) (any, error) {
	ws := fs.String("workspace", "", "workspace id (required)")
	return func(ctx context.Context, store control.Store) (any, error) {
		if err := requireWorkspace(ctx, store, *ws); err != nil {
			return nil, err
		}
		keys, err := store.ListAPIKeys(ctx, *ws)
		if err != nil {
			return nil, err
		}
		type item struct {
			ID        string   `json:"id"`
			Name      string   `json:"name,omitempty"`
			Scopes    []string `json:"scopes"`
			Legacy    bool     `json:"legacy,omitempty"`
			ExpiresAt any      `json:"expires_at"`
			RevokedAt any      `json:"revoked_at"`
			CreatedAt int64    `json:"created_at"`
		}
		orNull := func(ms int64) any {
			if ms == 0 {
				return nil
			}
			return ms
		}
		out := []item{}
		for _, k := range keys { // never the secret or its hash
			out = append(out, item{k.ID, k.Name, control.NonNil(k.Scopes), k.Legacy, orNull(k.ExpiresAt),
				orNull(k.RevokedAt), k.CreatedAt})
		}
		return map[string]any{"keys": out}, nil
	}
}

func adminVoiceList(fs *flag.FlagSet) func(context.Context, control.Store) (any, error) {
	ws := fs.String("workspace", "", "workspace id (required)")
	return func(ctx context.Context, store control.Store) (any, error) {
		if err := requireWorkspace(ctx, store, *ws); err != nil {
			return nil, err
		}
		type item struct {
			ID          string `json:"id"`
			Name        string `json:"name"`
			Status      string `json:"status"`
			CloneMethod string `json:"clone_method"`
			Visibility  string `json:"visibility"`
			Language    string `json:"primary_language"`
			CreatedAt   int64  `json:"created_at"`
		}
		out := []item{}
		// The workspace's own voices come first in every listing; the
		// public catalog voices after them are left out.
		for page := 1; ; page++ {
			vs, _, err := store.ListVoices(ctx, control.VoiceFilter{WorkspaceID: *ws, Page: page, PageSize: 100})
			if err != nil {
				return nil, err
			}
			own := 0
			for _, v := range vs {
				if v.OrgID == *ws {
					own++
					out = append(out, item{v.ID, v.Name, v.Status, v.CloneMethod, v.Visibility, v.PrimaryLanguage, v.CreatedAt})
				}
			}
			if own < len(vs) || len(vs) < 100 {
				break
			}
		}
		return map[string]any{"voices": out}, nil
	}
}

type workspaceJSON struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Plan        string `json:"plan"`
	Billing     string `json:"billing,omitempty"`
	Streaming   bool   `json:"streaming"`
	Allowance   int64  `json:"allowance"`
	Credits     int64  `json:"credits"`
	Used        int64  `json:"used"`
	Concurrency int    `json:"concurrency"`
	RPS         int    `json:"rps"`
	Sessions    int    `json:"sessions"`
}

func adminWorkspaceCreate(fs *flag.FlagSet) func(context.Context, control.Store) (any, error) {
	name := fs.String("name", "", "workspace name (required)")
	plan := fs.String("plan", "free", "free|starter|pro|enterprise")
	return func(ctx context.Context, store control.Store) (any, error) {
		if strings.TrimSpace(*name) == "" {
			return nil, errors.New("--name is required")
		}
		if !control.DisplayText(*name) {
			return nil, errors.New("--name: no control or bidirectional formatting characters")
		}
		if _, ok := control.Plans[*plan]; !ok {
			return nil, fmt.Errorf("--plan %q: want free, starter, pro or enterprise", *plan)
		}
		w := &control.Workspace{ID: control.NewID(), Name: *name, Plan: *plan}
		if err := store.CreateWorkspace(ctx, w); err != nil {
			return nil, err
		}
		return map[string]string{"id": w.ID, "name": w.Name, "plan": w.Plan}, nil
	}
}

func adminWorkspaceUpdate(fs *flag.FlagSet) func(context.Context, control.Store) (any, error) {
	id := fs.String("id", "", "workspace id (required)")
	var upd control.WorkspaceUpdate
	fs.Func("plan", "free|starter|pro|enterprise", func(v string) error {
		if _, ok := control.Plans[v]; !ok {
			return fmt.Errorf("unknown plan %q", v)
		}
		upd.Plan = &v
		return nil
	})
	fs.Func("billing", "off|meter|enforce", func(v string) error {
		if !control.ValidBilling(v) {
			return fmt.Errorf("want off, meter or enforce")
		}
		upd.Billing = &v
		return nil
	})
	fs.Func("streaming", "true|false", func(v string) error {
		b, err := strconv.ParseBool(v)
		upd.Streaming = &b
		return err
	})
	fs.Func("allowance", "monthly characters", int64Flag(&upd.Allowance))
	fs.Func("credits", "prepaid character balance", int64Flag(&upd.Credits))
	fs.Func("used", "this month's used characters", int64Flag(&upd.Used))
	fs.Func("concurrency", "concurrent streams", intFlag(&upd.Concurrency))
	fs.Func("rps", "requests per second (0 = no limit)", intFlag(&upd.RPS))
	fs.Func("sessions", "open realtime sessions", intFlag(&upd.Sessions))
	return func(ctx context.Context, store control.Store) (any, error) {
		if *id == "" {
			return nil, errors.New("--id is required")
		}
		w, err := store.UpdateWorkspace(ctx, *id, upd)
		if err != nil {
			return nil, err
		}
		lim := w.Limits(control.BillingEnforce)
		bal, err := store.Balance(ctx, w.ID, control.Month(time.Now()), lim.MonthlyChars)
		if err != nil {
			return nil, err
		}
		return workspaceJSON{ID: w.ID, Name: w.Name, Plan: w.Plan, Billing: w.Billing,
			Streaming: lim.Streaming, Allowance: lim.MonthlyChars, Credits: bal.Credits, Used: bal.Used,
			Concurrency: lim.Concurrency, RPS: lim.RPS, Sessions: lim.Sessions}, nil
	}
}

func adminKeyCreate(fs *flag.FlagSet) func(context.Context, control.Store) (any, error) {
	ws := fs.String("workspace", "", "workspace id (required)")
	scopes := fs.String("scopes", "", "comma-separated: tts,voices:read,voices:write,clone (default all)")
	expiresIn := fs.Duration("expires-in", 0, "lifetime, e.g. 90s or 2h (default: no expiry)")
	legacy := fs.Bool("legacy", false, "all scopes, no expiry (a key from before scopes)")
	return func(ctx context.Context, store control.Store) (any, error) {
		if *ws == "" {
			return nil, errors.New("--workspace is required")
		}
		if *expiresIn < 0 {
			return nil, errors.New("--expires-in must be positive")
		}
		k := &control.APIKey{ID: control.NewID(), WorkspaceID: *ws, Scopes: control.AllScopes,
			Legacy: *legacy, CreatedAt: control.NowMS()}
		if *scopes != "" && !*legacy {
			list, err := parseScopes(*scopes)
			if err != nil {
				return nil, err
			}
			k.Scopes = list
		}
		if *expiresIn > 0 && !*legacy {
			k.ExpiresAt = time.Now().Add(*expiresIn).UnixMilli()
		}
		if _, err := store.GetWorkspace(ctx, *ws); err != nil {
			return nil, err
		}
		secret, hash := control.NewAPIKeySecret()
		k.Hash = hash
		if err := store.CreateAPIKey(ctx, k); err != nil {
			return nil, err
		}
		var expires any // JSON null for keys that never expire
		if k.ExpiresAt > 0 {
			expires = k.ExpiresAt
		}
		return map[string]any{"id": k.ID, "key": secret, "scopes": k.Scopes, "expires_at": expires}, nil
	}
}

func adminKeyRevoke(fs *flag.FlagSet) func(context.Context, control.Store) (any, error) {
	id := fs.String("id", "", "key id (required)")
	return func(ctx context.Context, store control.Store) (any, error) {
		if *id == "" {
			return nil, errors.New("--id is required")
		}
		k, err := store.RevokeAPIKey(ctx, *id, control.NowMS())
		if err != nil {
			return nil, err
		}
		return map[string]any{"id": k.ID, "revoked_at": k.RevokedAt}, nil
	}
}

// maxLoginLinkTTL bounds --ttl: a sign-in link is meant to be opened soon
// by the person it was made for, not kept.
const maxLoginLinkTTL = 24 * time.Hour

// adminLoginLink mints a single-use dashboard sign-in link. Without a base
// URL the url is a path, to be put after the server's address.
func adminLoginLink(fs *flag.FlagSet) func(context.Context, control.Store) (any, error) {
	ws := fs.String("workspace", "", "workspace id (required)")
	ttl := fs.Duration("ttl", control.LoginLinkTTL, "how long the link stays valid (at most 24h)")
	base := fs.String("base-url", "", "public base URL of the service; env VOICESVC_BASE_URL")
	return func(ctx context.Context, store control.Store) (any, error) {
		if *ws == "" {
			return nil, errors.New("--workspace is required")
		}
		if *ttl <= 0 || *ttl > maxLoginLinkTTL {
			return nil, errors.New("--ttl must be positive and at most 24h")
		}
		baseURL := *base
		if baseURL == "" {
			baseURL = os.Getenv("VOICESVC_BASE_URL")
		}
		secret, hash := control.NewLoginLinkSecret()
		expires := time.Now().Add(*ttl)
		if err := store.CreateLoginLink(ctx, &control.LoginLink{Hash: hash, WorkspaceID: *ws,
			ExpiresAt: expires.UnixMilli()}); err != nil {
			return nil, err
		}
		return map[string]any{
			"url":        strings.TrimRight(baseURL, "/") + "/dashboard/login?token=" + secret,
			"expires_at": expires.UnixMilli(),
		}, nil
	}
}

func parseScopes(s string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, sc := range strings.Split(s, ",") {
		sc = strings.TrimSpace(sc)
		valid := false
		for _, known := range control.AllScopes {
			valid = valid || sc == known
		}
		if !valid {
			return nil, fmt.Errorf("unknown scope %q", sc)
		}
		if !seen[sc] {
			seen[sc] = true
			out = append(out, sc)
		}
	}
	return out, nil
}

func int64Flag(dst **int64) func(string) error {
	return func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("want a non-negative integer")
		}
		*dst = &n
		return nil
	}
}

func intFlag(dst **int) func(string) error {
	return func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fmt.Errorf("want a non-negative integer")
		}
		*dst = &n
		return nil
	}
}
