// Command voicesvc is the text-to-speech service: `serve` runs the API,
// `admin` manages workspaces and keys on the same store, `engine-worker` is
// a synthesis subprocess of the engine pool, and `bench` measures a server.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
)

// main is the one exit point. The first SIGTERM or interrupt ends ctx:
// serve drains for its grace and the process exits 0. Signals are then let
// go, so a second one ends the process at once (an operator's way out of a
// long grace).
func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `usage: voicesvc <command> [flags]

commands:
  serve           run the API server
  admin           manage workspaces and API keys (JSON on stdout)
  engine-worker   a synthesis worker subprocess (started by serve)
  bench           load-test a running server and write a report
  version         print the version, commit and Go version
`

// run dispatches a command and returns the process exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return runServe(ctx, args[1:], stderr)
	case "admin":
		return runAdmin(ctx, args[1:], stdout, stderr)
	case "engine-worker":
		return runEngineWorker(stdin, stdout, stderr)
	case "bench":
		return runBench(ctx, args[1:], stdout, stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, versionString())
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "voicesvc: unknown command %q\n%s", args[0], usage)
	return 2
}

// version is the release, set at build time with
// -ldflags "-X main.version=v1.2.3"; else the module's version from the
// build information ("(devel)" for a build from a checkout).
var version = ""

// versionString is `voicesvc version`: the version, then the commit (and
// "dirty" for uncommitted changes) and the Go version, from the build
// information the go command embeds.
func versionString() string {
	v, extra := version, []string{}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v == "" {
			v = bi.Main.Version
		}
		settings := map[string]string{}
		for _, s := range bi.Settings {
			settings[s.Key] = s.Value
		}
		if r := settings["vcs.revision"]; r != "" {
			if len(r) > 12 {
				r = r[:12]
			}
			if settings["vcs.modified"] == "true" {
				r += "-dirty"
			}
			extra = append(extra, "commit "+r)
		}
		if t := settings["vcs.time"]; t != "" {
			extra = append(extra, t)
		}
		extra = append(extra, bi.GoVersion)
	}
	if v == "" {
		v = "(devel)"
	}
	return "voicesvc " + v + " (" + strings.Join(extra, ", ") + ")"
}
