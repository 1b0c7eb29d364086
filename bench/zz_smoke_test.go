package bench

import (
	"context"
	"os"
	"strings"
	"testing"
)

func TestZZSmoke(t *testing.T) {
	base := os.Getenv("SMOKE_BASE")
	if base == "" {
		t.Skip()
	}
	args := append([]string{"--base", base, "--key", os.Getenv("SMOKE_KEY")}, strings.Fields(os.Getenv("SMOKE_ARGS"))...)
	if code := Main(context.Background(), args, os.Stdout, os.Stderr); code != 0 {
		t.Fatalf("exit %d", code)
	}
}
