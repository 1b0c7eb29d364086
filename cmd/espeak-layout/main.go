// Command espeak-layout reads the libespeak-ng.a that the build links and
// writes where its history variables sit (engine/espeak/layout) to
// engine/espeak/layouts/<the archive's sha256>.json, which the espeak
// package embeds: the binary then keeps its "same input, same samples"
// guarantee without the archive at run time (the container image has
// none). make build and the Dockerfile run it before go build; a build
// without it reads the archive at run time instead, as before.
//
//	go run ./cmd/espeak-layout [-archive PATH] [-out DIR]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"voicesvc/engine/espeak/layout"
)

func main() {
	archive := flag.String("archive", "", "libespeak-ng.a (default: the one cc links, -print-file-name)")
	out := flag.String("out", "engine/espeak/layouts", "directory the espeak package embeds")
	flag.Parse()
	if err := run(*archive, *out); err != nil {
		fmt.Fprintf(os.Stderr, "espeak-layout: %v\n", err)
		os.Exit(1)
	}
}

func run(archive, out string) error {
	if archive == "" {
		var err error
		if archive, err = layout.Find(); err != nil {
			return err
		}
	}
	l, err := layout.Compute(archive)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(out, l.Archive+".json")
	if old, err := os.ReadFile(path); err == nil && string(old) == string(b)+"\n" {
		return nil // this archive's layout is there already
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "espeak-layout: %s -> %s\n", archive, path)
	return nil
}
