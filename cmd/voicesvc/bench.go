package main

import (
	"context"
	"io"

	"voicesvc/bench"
)

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return bench.Main(ctx, args, stdout, stderr)
}
