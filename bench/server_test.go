package bench

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want procStat
		err  bool
	}{
		// comm with spaces and parentheses must not shift the fields.
		{"server", "1234 (voice svc (x)) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 7 3 20 0 12 0 100 1000000 500 18446744073709551615",
			procStat{ppid: 1, cpu: 3.1, rss: 500 * 4096}, false},
		{"truncated", "1 (x) S 1 2 3", procStat{}, true},
		{"no comm", "garbage", procStat{}, true},
		{"bad number", "1 (x) S 1 1 1 0 -1 0 0 0 0 0 x 0 0 0 20 0 1 0 1 1 1", procStat{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseProcStat(tc.in, 4096)
			if (err != nil) != tc.err || got.ppid != tc.want.ppid || !near(got.cpu, tc.want.cpu) || got.rss != tc.want.rss {
				t.Errorf("got %+v %v, want %+v err=%v", got, err, tc.want, tc.err)
			}
		})
	}
}

func TestProcSourceSelf(t *testing.T) {
	// The test process is a live process tree of one: it must be readable.
	cpu, rss, err := procSource{os.Getpid()}.read(context.Background())
	if err != nil || cpu < 0 || rss <= 0 {
		t.Errorf("cpu %v rss %v err %v", cpu, rss, err)
	}
}

func TestParseMetrics(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		cpu, rss float64
		err      bool
	}{
		{"client_golang output", "# HELP process_cpu_seconds_total x\n# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 12.5\nprocess_resident_memory_bytes 1.048576e+08\ngo_goroutines 7\n", 12.5, 104857600, false},
		{"missing gauge", "process_cpu_seconds_total 1\n", 0, 0, true},
		{"bad number", "process_cpu_seconds_total x\nprocess_resident_memory_bytes 1\n", 0, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cpu, rss, err := parseMetrics(strings.NewReader(tc.in))
			if (err != nil) != tc.err || !near(cpu, tc.cpu) || !near(rss, tc.rss) {
				t.Errorf("got %v %v %v", cpu, rss, err)
			}
		})
	}
}

func TestListenInodes(t *testing.T) {
	table := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 100 0 0 10 0
   1: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 5555 1 0000000000000000 20 4 30 10 -1
   2: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 7777 1 0000000000000000 100 0 0 10 0
`
	got := listenInodes(table, 8080)
	if len(got) != 1 || got[0] != "4242" {
		t.Errorf("got %v, want [4242] (listening on 8080 only)", got)
	}
}

func TestSummarizeUsage(t *testing.T) {
	t0 := time.Unix(0, 0)
	ts := []time.Time{t0, t0.Add(time.Second), t0.Add(2 * time.Second)}
	u := summarizeUsage(ServerUsage{Source: "proc"}, ts, []float64{10, 10.5, 11}, []float64{1 << 20, 3 << 20, 2 << 20})
	if !near(u.CPUSeconds, 1) || !near(u.CPUPercent, 50) || !near(u.RSSPeakMB, 3) || !near(u.RSSMeanMB, 2) {
		t.Errorf("got %+v", u)
	}
	if z := summarizeUsage(ServerUsage{Source: "none"}, nil, nil, nil); z.CPUPercent != 0 {
		t.Errorf("empty: %+v", z)
	}
}
