package espeak

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// historyChildEnv runs TestHistoryChild in a test subprocess: findHistory
// runs once per process, so each way of finding the history needs its own.
const historyChildEnv = "VOICESVC_ESPEAK_HISTORY_CHILD"

// With libespeak-ng.a missing at run time (the container image has none),
// the layout embedded at build time still locates the history, and a
// request renders the same samples whatever ran before it. Without the
// embedded layout, the same missing archive leaves the history unlocated
// and the samples depend on what ran before: the archive was really out
// of reach.
func TestHistoryWithoutArchive(t *testing.T) {
	if testing.Short() {
		t.Skip("renders 64 requests in two subprocesses")
	}
	var reasons []string
	if len(embeddedLayouts(&reasons)) == 0 {
		t.Skipf("no embedded layout (make build or go run ./cmd/espeak-layout writes it): %v", reasons)
	}
	for _, mode := range []string{"embedded", "archive-only"} {
		t.Run(mode, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestHistoryChild$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), historyChildEnv+"="+mode,
				archiveEnv+"="+t.TempDir()+"/missing/libespeak-ng.a")
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "--- PASS: TestHistoryChild") {
				t.Fatalf("child (%s): %v\n%s", mode, err, out)
			}
		})
	}
}

// TestHistoryChild is TestHistoryWithoutArchive's subprocess.
func TestHistoryChild(t *testing.T) {
	mode := os.Getenv(historyChildEnv)
	if mode == "" {
		t.Skip("run by TestHistoryWithoutArchive")
	}
	useEmbeddedLayouts = mode == "embedded"
	e := mustNew(t)
	reqs := concurrentRequests(e)
	want := make([]result, len(reqs))
	for i := len(reqs) - 1; i >= 0; i-- {
		want[i] = renderReq(t, e, reqs[i])
	}
	differ := 0
	for i := range reqs {
		if got := renderReq(t, e, reqs[i]); !equal(got.samples, want[i].samples) {
			differ++
		}
	}
	switch mode {
	case "embedded":
		if err := e.Reproducible(); err != nil {
			t.Fatalf("archive missing, embedded layout: %v", err)
		}
		if differ > 0 {
			t.Errorf("%d of %d requests rendered differently after others", differ, len(reqs))
		}
	default:
		if err := e.Reproducible(); !errors.Is(err, errNoHistory) {
			t.Fatalf("archive missing, no embedded layout: %v, want errNoHistory", err)
		}
		if differ == 0 {
			t.Errorf("without the history restored every request rendered the same: the test cannot tell")
		}
		t.Logf("without the history: %d of %d requests differ; %v", differ, len(reqs), e.Reproducible())
	}
}
