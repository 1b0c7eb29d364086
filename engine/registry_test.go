package engine_test

import (
	"errors"
	"slices"
	"testing"

	"voicesvc/engine"
	"voicesvc/engine/reference"
)

// named is an engine under another name, with its own languages and,
// optionally, replicas.
type named struct {
	engine.Engine
	name     string
	langs    []string
	replicas []engine.ReplicaStatus
}

func (n named) Name() string        { return n.name }
func (n named) Languages() []string { return n.langs }
func (n named) Status() engine.Status {
	return engine.Status{Name: n.name, Type: "openai", Replicas: n.replicas}
}

func TestRegistry(t *testing.T) {
	builtin := reference.New()
	up := named{Engine: builtin, name: "up1", langs: []string{"ja", "en-US"},
		replicas: []engine.ReplicaStatus{{URL: "http://a", State: "ejected"}, {URL: "http://b", State: "up"}}}
	r, err := engine.NewRegistry(builtin, up)
	if err != nil {
		t.Fatal(err)
	}
	if e, err := r.For(""); err != nil || e != engine.Engine(builtin) {
		t.Fatalf("built-in: %v %v", e, err)
	}
	if e, err := r.For("up1"); err != nil || e.Name() != "up1" {
		t.Fatalf("up1: %v %v", e, err)
	}
	if _, err := r.For("gone"); !errors.Is(err, engine.ErrUnknownEngine) {
		t.Fatalf("unknown: %v", err)
	}
	langs := r.Languages()
	if langs[0] != builtin.Languages()[0] || !slices.Contains(langs, "ja") || !slices.Contains(langs, "en-US") {
		t.Fatalf("languages %v", langs)
	}
	if st := r.Statuses(); len(st) != 1 || st[0].Name != "up1" || len(st[0].Replicas) != 2 {
		t.Fatalf("statuses %+v", st)
	}
	if err := r.Ready(); err != nil {
		t.Fatalf("one replica up is ready: %v", err)
	}
	down := named{Engine: builtin, name: "up2", replicas: []engine.ReplicaStatus{{URL: "http://c", State: "ejected"}}}
	r2, _ := engine.NewRegistry(builtin, up, down)
	if err := r2.Ready(); err == nil {
		t.Fatal("an engine with every replica ejected is not ready")
	}
	for _, bad := range [][]engine.Engine{{named{Engine: builtin, name: ""}}, {up, up}, {named{Engine: builtin, name: builtin.Name()}}} {
		if _, err := engine.NewRegistry(builtin, bad...); err == nil {
			t.Fatalf("names %v must be refused", bad)
		}
	}
}
