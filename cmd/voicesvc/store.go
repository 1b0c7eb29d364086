package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"voicesvc/control"
	"voicesvc/control/postgres"
	"voicesvc/control/sqlite"
)

const defaultDB = "sqlite://./data/voicesvc.db"

// defaultStoreTimeout bounds a store call unless --store-timeout says
// otherwise; maxStoreTimeout keeps it under the gateway's own 10 s bound
// on a handler's store call, so that a hung store is a 503, not a wait.
const (
	defaultStoreTimeout = 5 * time.Second
	maxStoreTimeout     = 10 * time.Second
)

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

// openStore opens the store a --db URL names and applies its migrations;
// timeout bounds each of its calls (--store-timeout).
func openStore(ctx context.Context, url string, timeout time.Duration) (control.Store, error) {
	switch {
	case strings.HasPrefix(url, "sqlite://"):
		path := strings.TrimPrefix(url, "sqlite://")
		if path == "" {
			return nil, fmt.Errorf("--db %q: no file path after sqlite://", url)
		}
		return sqlite.OpenWith(ctx, path, sqlite.Options{Timeout: timeout})
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		return postgres.OpenWith(ctx, url, postgres.Options{Timeout: timeout})
	}
	return nil, fmt.Errorf("--db %q: want sqlite://PATH or postgres://...", url)
}
