package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// newTracing starts OpenTelemetry tracing when the standard OTLP variables
// ask for it (README, "Tracing"): OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT set, and neither OTEL_SDK_DISABLED=true
// nor OTEL_TRACES_EXPORTER=none. The exporter reads the other OTEL_EXPORTER_OTLP_*
// variables (headers, timeout, certificates), the SDK OTEL_TRACES_SAMPLER
// and the resource OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES. Without
// them it returns a nil provider: the gateway then does no tracing work at
// all. stop flushes the spans still batched.
func newTracing(ctx context.Context, logger *slog.Logger) (tp trace.TracerProvider, stop func(), err error) {
	if !tracingEnabled(os.Getenv) {
		return nil, func() {}, nil
	}
	proto := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if proto != "" && proto != "http/protobuf" {
		return nil, nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL %q: voicesvc exports traces over http/protobuf only", proto)
	}
	exp, err := otlptracehttp.New(ctx) // endpoint and options from the environment
	if err != nil {
		return nil, nil, fmt.Errorf("otlp exporter: %w", err)
	}
	// service.name defaults to voicesvc; the environment's resource wins.
	res, err := resource.Merge(resource.NewSchemaless(attribute.String("service.name", "voicesvc")),
		resource.Environment())
	if err != nil {
		return nil, nil, fmt.Errorf("otel resource: %w", err)
	}
	sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	logger.Info("tracing on", "exporter", "otlp/http")
	return sdk, func() {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := sdk.Shutdown(c); err != nil {
			logger.Warn("tracing: flushing spans failed", "err", err)
		}
	}, nil
}

// tracingEnabled: an OTLP endpoint is configured and tracing not disabled.
func tracingEnabled(getenv func(string) string) bool {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") || strings.EqualFold(getenv("OTEL_TRACES_EXPORTER"), "none") {
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}
