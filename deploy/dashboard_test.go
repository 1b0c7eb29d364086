package deploy

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"voicesvc/control/sqlite"
	"voicesvc/engine"
	"voicesvc/engine/reference"
	"voicesvc/engine/upstream"
	"voicesvc/gateway"
)

// exportedSeries is every series a server can export, with its labels: the
// descriptions its registry holds, for a server with the engine pool and an
// upstream engine.
func exportedSeries(t *testing.T) map[string][]string {
	t.Helper()
	store, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "voicesvc.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	pool, err := engine.NewPool(engine.PoolOptions{Engine: reference.New(), Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	up, err := upstream.New(upstream.Config{Name: "up1", Type: "openai", URLs: []string{"http://127.0.0.1:1"},
		Model: "m", Timeout: time.Second, MaxWait: time.Second,
		Voices: []upstream.Voice{{Alias: "up1-a", Voice: "a", Language: "en"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { up.Close() })
	engines, err := engine.NewRegistry(pool, up)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	desc := regexp.MustCompile(`fqName: "([^"]+)".*variableLabels: \{([^}]*)\}\}$`)
	// The serve command's registry: the Go and process collectors.
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	srv, err := gateway.New(gateway.Config{}, gateway.Deps{Store: store, Engine: pool, Engines: engines, Registry: reg,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan *prometheus.Desc, 1024)
	reg.Describe(ch)
	close(ch)
	for d := range ch {
		m := desc.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read %s", d)
		}
		var labels []string
		if m[2] != "" {
			labels = strings.Split(m[2], ",")
		}
		out[m[1]] = labels
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	srv.Shutdown(ctx)
	cancel()
	return out
}

// dashboard is the part of a Grafana dashboard the test reads.
type dashboard struct {
	UID        string  `json:"uid"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

// targetLabels are the labels Prometheus adds to every series it scrapes;
// the dashboard's variables of the same names select the targets.
var targetLabels = []string{"job", "instance"}

// seriesUse: a series name with its matchers, if any.
var seriesUse = regexp.MustCompile(`\b((?:voicesvc|process|go)_[a-zA-Z0-9_]+)\b(\{[^}]*\})?`)

type panel struct {
	Title   string `json:"title"`
	Type    string `json:"type"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

var (
	// seriesName: a metric name in PromQL (not a function, keyword or
	// label: those are followed by "(" or sit inside {} and by ()).
	seriesName = regexp.MustCompile(`\b((?:voicesvc|process|go)_[a-zA-Z0-9_]+)\b`)
	// labelUse: a matcher {name=...} or a grouping by (a, b).
	matcher  = regexp.MustCompile(`\b(voicesvc_[a-zA-Z0-9_]+)\{([^}]*)\}`)
	grouping = regexp.MustCompile(`by \(([^)]*)\)`)
)

// TestGrafanaDashboard: deploy/grafana-dashboard.json parses, and every
// panel's expressions name series the server exports, with labels those
// series have.
func TestGrafanaDashboard(t *testing.T) {
	b, err := os.ReadFile("grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	if d.UID == "" {
		t.Error("the dashboard has no uid")
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type + " " + v.Definition
	}
	for _, l := range targetLabels {
		if !strings.HasPrefix(vars[l], "query label_values(") || !strings.HasSuffix(vars[l], ", "+l+")") {
			t.Errorf("the dashboard has no %s variable listing the %s label's values: %q", l, l, vars[l])
		}
	}
	series := exportedSeries(t)
	labelsOf := func(name string) ([]string, bool) {
		if l, ok := series[name]; ok {
			return l, true
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok {
				if l, ok := series[base]; ok {
					if suffix == "_bucket" {
						l = append(append([]string(nil), l...), "le")
					}
					return l, true
				}
			}
		}
		return nil, false
	}
	used := map[string]bool{}
	exprs := 0
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs++
			names := seriesName.FindAllString(tg.Expr, -1)
			if len(names) == 0 {
				t.Errorf("panel %q: %q names no series", p.Title, tg.Expr)
			}
			var exprLabels []string
			for _, n := range names {
				l, ok := labelsOf(n)
				if !ok {
					t.Errorf("panel %q: %s is not a series the server exports", p.Title, n)
					continue
				}
				used[strings.TrimSuffix(n, "_bucket")] = true
				exprLabels = append(exprLabels, l...)
			}
			for _, m := range matcher.FindAllStringSubmatch(tg.Expr, -1) {
				l, _ := labelsOf(m[1])
				for _, kv := range strings.Split(m[2], ",") {
					name := strings.TrimSpace(strings.FieldsFunc(kv, func(r rune) bool { return strings.ContainsRune("=!~", r) })[0])
					if !contains(l, name) && !contains(targetLabels, name) {
						t.Errorf("panel %q: %s has no label %q", p.Title, m[1], name)
					}
				}
			}
			// Every series is read from the targets the variables select:
			// without it, a panel of process_ or go_ series mixes every
			// job Prometheus scrapes.
			for _, m := range seriesUse.FindAllStringSubmatch(tg.Expr, -1) {
				for _, l := range targetLabels {
					if !strings.Contains(m[2], l+`=~"$`+l+`"`) {
						t.Errorf("panel %q: %s is not filtered by %s=~\"$%s\"", p.Title, m[1], l, l)
					}
				}
			}
			for _, g := range grouping.FindAllStringSubmatch(tg.Expr, -1) {
				for _, name := range strings.Split(g[1], ",") {
					if name = strings.TrimSpace(name); !contains(exprLabels, name) {
						t.Errorf("panel %q: groups by %q, which %v do not have", p.Title, name, names)
					}
				}
			}
		}
	}
	// Every synthesis series of docs/api.md#metrics is on the dashboard.
	for name := range series {
		if strings.HasPrefix(name, "voicesvc_") && !used[name] {
			t.Errorf("%s is exported but on no panel", name)
		}
	}
	t.Logf("%d panels, %d expressions, %d series exported", len(d.Panels), exprs, len(series))
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
