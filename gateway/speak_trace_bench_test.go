package gateway

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// BenchmarkSpeakHandlerTraced: the same with tracing on, every span
// sampled and ended into a processor that drops it (the SDK's cost, not an
// exporter's).
func BenchmarkSpeakHandlerTraced(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(discardSpans{}))
	b.Cleanup(func() { tp.Shutdown(b.Context()) })
	benchSpeakHandler(b, Deps{TracerProvider: tp})
}

type discardSpans struct{}

func (discardSpans) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (discardSpans) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (discardSpans) Shutdown(context.Context) error                  { return nil }
func (discardSpans) ForceFlush(context.Context) error                { return nil }
