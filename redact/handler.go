package redact

import (
	"context"
	"encoding"
	"fmt"
	"log/slog"
	"strings"
)

// Handler is a slog.Handler that redacts every record before the handler it
// wraps sees it: the message, every attribute's value (strings, errors,
// Stringers and anything formatted with %+v; groups and LogValuers
// resolved and walked), and attributes added through WithAttrs. An
// attribute whose key names a credential (credentialNames, e.g.
// "authorization") loses its value whatever it is.
type Handler struct{ next slog.Handler }

// NewHandler wraps next. Wrapping a Handler again returns it unchanged.
func NewHandler(next slog.Handler) slog.Handler {
	if h, ok := next.(*Handler); ok {
		return h
	}
	return &Handler{next: next}
}

// Logger is slog.New(NewHandler(l.Handler())): l with redaction.
func Logger(l *slog.Logger) *slog.Logger {
	return slog.New(NewHandler(l.Handler()))
}

func (h *Handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, String(r.Message), r.PC)
	attrs := make([]slog.Attr, 0, r.NumAttrs())
	r.Attrs(func(a slog.Attr) bool {
		attrs = append(attrs, Attr(a))
		return true
	})
	out.AddAttrs(attrs...)
	return h.next.Handle(ctx, out)
}

func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		red[i] = Attr(a)
	}
	return &Handler{next: h.next.WithAttrs(red)}
}

func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{next: h.next.WithGroup(name)}
}

// Attr returns a with its value redacted (and its key, which may come from
// a client as well, e.g. a header name).
func Attr(a slog.Attr) slog.Attr {
	a.Key = String(a.Key)
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		g := v.Group()
		red := make([]slog.Attr, len(g))
		for i, ga := range g {
			red[i] = Attr(ga)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(red...)}
	}
	if isCredentialName(a.Key) {
		return slog.String(a.Key, Mask)
	}
	return slog.Attr{Key: a.Key, Value: value(v)}
}

// value redacts a resolved, non-group value. Numbers, booleans, times and
// durations cannot hold a secret and pass unchanged; anything else is
// turned into the text the handler would have printed, then redacted.
func value(v slog.Value) slog.Value {
	switch v.Kind() {
	case slog.KindString:
		if s, r := v.String(), String(v.String()); r != s {
			return slog.StringValue(r)
		}
		return v
	case slog.KindAny:
		var s string
		switch x := v.Any().(type) {
		case error:
			s = x.Error()
		case fmt.Stringer:
			s = x.String()
		case encoding.TextMarshaler:
			b, err := x.MarshalText()
			if err != nil {
				s = fmt.Sprintf("%+v", x)
			} else {
				s = string(b)
			}
		case []byte:
			s = string(x)
		default:
			s = fmt.Sprintf("%+v", x)
		}
		return slog.StringValue(String(s))
	}
	return v
}

func isCredentialName(key string) bool {
	k := strings.ToLower(key)
	for _, n := range credentialNames {
		if strings.Contains(k, n) {
			return true
		}
	}
	return false
}
