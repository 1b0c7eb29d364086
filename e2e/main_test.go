package e2e

import (
	"os"
	"testing"
)

// TestMain removes what the tests made outside t.TempDir: the clip
// directory shared by the clone tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if clDir != "" {
		os.RemoveAll(clDir)
	}
	os.Exit(code)
}
