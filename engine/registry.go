package engine

import (
	"errors"
	"fmt"
	"sort"
)

// ErrUnknownEngine: a voice names an engine the server does not configure
// (an upstream removed from the configuration while remixes of its voices
// remain).
var ErrUnknownEngine = errors.New("engine: not configured")

// Registry maps engine names to engines: the built-in engine under "" and
// each upstream engine under its name. A voice names its engine
// (control.Voice.Engine), and whatever renders the voice asks the registry,
// so transports and handlers never learn which kind of engine it is.
type Registry struct {
	builtin Engine
	byName  map[string]Engine
	others  []Engine // in configured order
	langs   []string
}

// ReplicaStatus is one replica of an engine served by several.
type ReplicaStatus struct {
	URL   string // any password hidden
	State string // "up" or "ejected"
	// Totals since start: attempts sent, attempts that retried a failure
	// elsewhere, attempts that failed (any cause but the caller's cancel),
	// and ejections.
	Requests, Retries, Failures, Ejections uint64
}

// Status describes an engine with replicas for the readiness check.
type Status struct {
	Name     string
	Type     string
	Replicas []ReplicaStatus
}

// Replicated is an engine served by replicas (an upstream): the registry
// lists its state, and it is ready while a replica is up.
type Replicated interface {
	Engine
	Status() Status
}

// NewRegistry registers builtin (may be nil: nothing is served) and others
// under their Name, which must be unique and not "". The languages of every
// engine are read now: an upstream that discovers its voices does so
// before it is registered.
func NewRegistry(builtin Engine, others ...Engine) (*Registry, error) {
	r := &Registry{builtin: builtin, byName: map[string]Engine{}}
	seen := map[string]bool{}
	add := func(langs []string) {
		for _, l := range langs {
			if !seen[l] {
				seen[l] = true
				r.langs = append(r.langs, l)
			}
		}
	}
	if builtin != nil {
		add(builtin.Languages())
	}
	nb := len(r.langs)
	for _, e := range others {
		name := e.Name()
		if name == "" || r.byName[name] != nil || builtin != nil && name == builtin.Name() {
			return nil, fmt.Errorf("engine: name %q is empty or taken", name)
		}
		r.byName[name] = e
		r.others = append(r.others, e)
		add(e.Languages())
	}
	// The built-in engine's in its order (its first is the default of a
	// voice without a language), then the others' sorted.
	sort.Strings(r.langs[nb:])
	return r, nil
}

// Builtin is the built-in engine (cloning runs on it), or nil.
func (r *Registry) Builtin() Engine { return r.builtin }

// For returns the engine named name: "" is the built-in engine.
// ErrUnknownEngine (wrapped) when there is none by that name.
func (r *Registry) For(name string) (Engine, error) {
	if name == "" {
		if r.builtin == nil {
			return nil, fmt.Errorf("%w: no built-in engine", ErrUnknownEngine)
		}
		return r.builtin, nil
	}
	if e := r.byName[name]; e != nil {
		return e, nil
	}
	return nil, fmt.Errorf("%w: no engine %q", ErrUnknownEngine, name)
}

// Others are the engines beside the built-in one, in configured order.
func (r *Registry) Others() []Engine { return r.others }

// Languages is every tag some engine accepts, the built-in engine's first
// (in its order), then the others' sorted. Callers must not modify it.
func (r *Registry) Languages() []string { return r.langs }

// Statuses describes the replicated engines, in configured order.
func (r *Registry) Statuses() []Status {
	var out []Status
	for _, e := range r.others {
		if re, ok := e.(Replicated); ok {
			out = append(out, re.Status())
		}
	}
	return out
}

// Ready fails naming the first replicated engine without a replica up.
func (r *Registry) Ready() error {
	for _, st := range r.Statuses() {
		up := false
		for _, rep := range st.Replicas {
			up = up || rep.State == "up"
		}
		if !up {
			return fmt.Errorf("engine %s: no replica is up", st.Name)
		}
	}
	return nil
}
