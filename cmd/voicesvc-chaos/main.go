// Command voicesvc-chaos runs the hardening suite (package chaos) against
// the real voicesvc binary: `voicesvc-chaos` runs every probe and prints
// the table; `-fast` only the quick ones; `soak -duration 1h` runs steady
// mixed traffic and writes a CSV of the server's resources (`soak -faults`
// injects the upstream and store faults in turn meanwhile).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"syscall"
	"time"

	"voicesvc/chaos"
)

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(args) > 0 && args[0] == "soak" {
		return soak(ctx, args[1:])
	}
	fs := flag.NewFlagSet("voicesvc-chaos", flag.ContinueOnError)
	bin := fs.String("bin", "bin/voicesvc", "voicesvc binary to attack")
	fast := fs.Bool("fast", false, "only the fast probes (those of make chaos-fast)")
	match := fs.String("run", "", "only probes whose name matches this regexp")
	limit := fs.Duration("timeout", 10*time.Minute, "bound on the whole run")
	quiet := fs.Bool("q", false, "no progress lines")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var filter *regexp.Regexp
	if *match != "" {
		var err error
		if filter, err = regexp.Compile(*match); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	}
	log := os.Stderr
	if *quiet {
		log = nil
	}
	s, err := chaos.NewSuite(*bin, logWriter(log))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(ctx, *limit)
	defer cancel()
	probes := chaos.Probes()
	if *fast {
		probes = chaos.FastProbes()
	}
	// A probe that hangs past its own limits must not hang the run: past
	// the bound plus a minute the suite cleans up and fails.
	watchdog := time.AfterFunc(*limit+time.Minute, func() {
		fmt.Fprintf(os.Stderr, "chaos: run exceeded %v; stopping\n", *limit)
		go s.Close()
		time.Sleep(20 * time.Second)
		fmt.Println("0 passed, 1 failed")
		os.Exit(1)
	})
	defer watchdog.Stop()
	start := time.Now()
	results := s.Run(ctx, probes, filter)
	ok := chaos.Report(os.Stdout, results)
	fmt.Fprintf(os.Stderr, "chaos: whole run %s\n", time.Since(start).Round(time.Second))
	if !ok {
		return 1
	}
	return 0
}

func soak(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("voicesvc-chaos soak", flag.ContinueOnError)
	bin := fs.String("bin", "bin/voicesvc", "voicesvc binary to run")
	duration := fs.Duration("duration", time.Hour, "how long to run")
	rate := fs.Float64("rate", 20, "requests per second, all kinds together")
	every := fs.Duration("sample", time.Minute, "sampling interval")
	out := fs.String("out", "chaos/results", "directory for the CSV and the summary")
	faults := fs.Bool("faults", false, "inject the upstream and store faults in turn under the load")
	window := fs.Duration("fault-window", 20*time.Second, "length of an upstream fault window")
	faultEvery := fs.Duration("fault-every", 0, "one fault window starts this often (0: min(2m, duration/14), at least fault-window+10s)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	s, err := chaos.NewSuite(*bin, logWriter(os.Stderr))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer s.Close()
	ok, err := s.Soak(ctx, chaos.SoakOpts{Duration: *duration, Rate: *rate, Sample: *every, OutDir: *out,
		Faults: *faults, FaultWindow: *window, FaultEvery: *faultEvery}, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		return 1
	}
	if !ok {
		return 1
	}
	return 0
}

// logWriter avoids a typed nil io.Writer when progress is off.
func logWriter(f *os.File) interface{ Write([]byte) (int, error) } {
	if f == nil {
		return nil
	}
	return f
}
