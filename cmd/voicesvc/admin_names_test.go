package main

import (
	"context"
	"flag"
	"io"
	"strings"
	"testing"
)

// A workspace name, shown in the dashboard, refuses control and
// bidirectional formatting characters before anything is stored.
func TestAdminWorkspaceNameRefusesSpoofing(t *testing.T) {
	for _, name := range []string{"acme\x00", "acme\u202Eevil", "acme\u2066x", "acme\u200F", "acme\n"} {
		fs := flag.NewFlagSet("workspace create", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		run := adminWorkspaceCreate(fs)
		if err := fs.Parse([]string{"--name", name}); err != nil {
			t.Fatal(err)
		}
		// A nil store: the name must be refused before it is used.
		_, err := run(context.Background(), nil)
		if err == nil || !strings.Contains(err.Error(), "--name") {
			t.Errorf("name %q: %v, want an error naming --name", name, err)
		}
	}
}
