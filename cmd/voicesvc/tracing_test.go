package main

import (
	"context"
	"log/slog"
	"testing"
)

func TestTracingEnabled(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want bool
	}{
		{nil, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER": "none"}, false},
	} {
		if got := tracingEnabled(func(k string) string { return tc.env[k] }); got != tc.want {
			t.Errorf("%v: %v, want %v", tc.env, got, tc.want)
		}
	}
}

// Off: no provider at all (the gateway then skips every tracing step). On:
// an SDK provider; a protocol other than http/protobuf is refused.
func TestNewTracing(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	tp, stop, err := newTracing(context.Background(), log)
	if err != nil || tp != nil {
		t.Fatalf("off: %v, %v", tp, err)
	}
	stop()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	tp, stop, err = newTracing(context.Background(), log)
	if err != nil || tp == nil {
		t.Fatalf("on: %v, %v", tp, err)
	}
	stop()
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	if _, _, err := newTracing(context.Background(), log); err == nil {
		t.Fatal("grpc accepted")
	}
}
