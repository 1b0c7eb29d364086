package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"voicesvc/control"
	"voicesvc/control/postgres"
	"voicesvc/control/sqlite"
)

const defaultDB = "sqlite://./data/voicesvc.db"

// dbURL is the --db value, else VOICESVC_DB, else the embedded default.
func dbURL(flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	if v := os.Getenv("VOICESVC_DB"); v != "" {
		return v
	}
	return defaultDB
}

// openStore opens the store a --db URL names and applies its migrations.
func openStore(ctx context.Context, url string) (control.Store, error) {
	switch {
	case strings.HasPrefix(url, "sqlite://"):
		path := strings.TrimPrefix(url, "sqlite://")
		if path == "" {
			return nil, fmt.Errorf("--db %q: no file path after sqlite://", url)
		}
		return sqlite.Open(ctx, path)
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		return postgres.Open(ctx, url)
	}
	return nil, fmt.Errorf("--db %q: want sqlite://PATH or postgres://...", url)
}
