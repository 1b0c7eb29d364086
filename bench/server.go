package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// getJSON fetches base+path (never another host) into v.
func (t *target) getJSON(ctx context.Context, path string, auth bool, v any) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.base+path, nil)
	if err != nil {
		return err
	}
	if auth {
		req.Header.Set("X-API-Key", t.key)
	}
	resp, err := t.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, statusErrorBody(resp.StatusCode, body))
	}
	return json.Unmarshal(body, v)
}

func statusErrorBody(status int, body []byte) string {
	if code := errorCode(body); code != "" {
		return fmt.Sprintf("%d %s", status, code)
	}
	return strconv.Itoa(status)
}

// engineName reads the engine from /readyz: {"engine": ...} at the top level
// or in an envelope's data, whatever the status (a not-ready server may still
// name its engine). Any failure is "unknown": the report must still be written.
func (t *target) engineName(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.base+"/readyz", nil)
	if err != nil {
		return "unknown"
	}
	resp, err := t.client.Do(req)
	if err != nil {
		return "unknown"
	}
	defer resp.Body.Close()
	var v struct {
		Engine string `json:"engine"`
		Data   struct {
			Engine string `json:"engine"`
		} `json:"data"`
	}
	if json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&v) != nil {
		return "unknown"
	}
	for _, e := range []string{v.Engine, v.Data.Engine} {
		if e != "" {
			return e
		}
	}
	return "unknown"
}

var hexID = regexp.MustCompile(`^[0-9a-f]{24}$`)

// resolveVoice sets voiceID and voiceRef. A 24-hex ref is taken as an id
// as is; an alias, name or empty ref is looked up in GET /voices (at most 20
// pages) for a ready voice.
func (t *target) resolveVoice(ctx context.Context, ref string) error {
	if hexID.MatchString(ref) {
		t.voiceID, t.voiceRef = ref, ref
		return nil
	}
	for page := 1; page <= 20; page++ {
		var v struct {
			Data struct {
				Voices []struct {
					ID, Name, Alias, Status string
				} `json:"voices"`
				HasMore bool `json:"has_more"`
			} `json:"data"`
		}
		if err := t.getJSON(ctx, fmt.Sprintf("%s/voices?page=%d&page_size=100", apiPath, page), true, &v); err != nil {
			return fmt.Errorf("list voices: %w", err)
		}
		for _, vc := range v.Data.Voices {
			if vc.Status != "ready" {
				continue
			}
			if ref == "" || vc.Alias == ref || vc.Name == ref {
				t.voiceID, t.voiceRef = vc.ID, vc.ID
				if vc.Alias != "" {
					t.voiceRef = vc.Alias
				}
				return nil
			}
		}
		if !v.Data.HasMore {
			break
		}
	}
	if ref == "" {
		return fmt.Errorf("no ready voice in GET /voices")
	}
	return fmt.Errorf("voice %q not found among ready voices", ref)
}

// usageSource reads the server's cumulative CPU seconds and resident bytes.
type usageSource interface {
	read(ctx context.Context) (cpu, rss float64, err error)
	name() string
}

type procSource struct{ pid int }

func (p procSource) name() string { return "proc" }

// userHZ is the kernel's USER_HZ for /proc/<pid>/stat; 100 on every Linux
// build that matters, and reading it needs cgo (sysconf).
const userHZ = 100

// read sums CPU and RSS over the server and its descendants: the engine
// runs in worker subprocesses, which are the server's cost too. Each
// process's cutime/cstime carries its exited children, so CPU does not drop
// when a worker is replaced.
func (p procSource) read(context.Context) (float64, float64, error) {
	root, err := readProcStat(p.pid)
	if err != nil {
		return 0, 0, err
	}
	all := map[int]procStat{p.pid: root}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	byParent := map[int][]int{}
	for _, d := range dirs {
		pid, _ := strconv.Atoi(filepath.Base(d))
		if st, err := readProcStat(pid); err == nil && pid != p.pid {
			all[pid] = st
			byParent[st.ppid] = append(byParent[st.ppid], pid)
		}
	}
	var cpu, rss float64
	for queue := []int{p.pid}; len(queue) > 0; queue = queue[1:] {
		st := all[queue[0]]
		cpu += st.cpu
		rss += st.rss
		queue = append(queue, byParent[queue[0]]...)
	}
	return cpu, rss, nil
}

// procStat is what the bench needs from /proc/<pid>/stat.
type procStat struct {
	ppid int
	cpu  float64 // utime+stime+cutime+cstime, seconds
	rss  float64 // bytes
}

func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	return parseProcStat(string(b), os.Getpagesize())
}

// parseProcStat parses one stat line. The command name may contain spaces
// and parentheses, so fields are counted after the last ')': ppid is field 4
// of proc(5), utime..cstime 14-17, rss (pages) 24.
func parseProcStat(s string, pageSize int) (procStat, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("proc stat: no comm")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 22 {
		return procStat{}, fmt.Errorf("proc stat: %d fields", len(f))
	}
	var n [5]float64
	for j, idx := range []int{11, 12, 13, 14, 21} {
		v, err := strconv.ParseFloat(f[idx], 64)
		if err != nil {
			return procStat{}, fmt.Errorf("proc stat: field %d: %w", idx+3, err)
		}
		n[j] = v
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return procStat{}, fmt.Errorf("proc stat: ppid: %w", err)
	}
	return procStat{ppid: ppid, cpu: (n[0] + n[1] + n[2] + n[3]) / userHZ, rss: n[4] * float64(pageSize)}, nil
}

type metricsSource struct{ t *target }

func (m metricsSource) name() string { return "metrics" }

func (m metricsSource) read(ctx context.Context) (float64, float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.t.base+"/metrics", nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := m.t.client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("metrics: %d", resp.StatusCode)
	}
	return parseMetrics(io.LimitReader(resp.Body, 16<<20))
}

// parseMetrics picks the two process gauges from the Prometheus text format.
func parseMetrics(r io.Reader) (cpu, rss float64, err error) {
	found := 0
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "process_cpu_seconds_total":
			cpu, err = strconv.ParseFloat(f[1], 64)
			found++
		case "process_resident_memory_bytes":
			rss, err = strconv.ParseFloat(f[1], 64)
			found++
		}
		if err != nil {
			return 0, 0, err
		}
	}
	if found < 2 {
		return 0, 0, fmt.Errorf("metrics: process gauges missing")
	}
	return cpu, rss, sc.Err()
}

// pickUsageSource prefers /proc (exact, no server work) and falls back to
// /metrics; nil when neither answers.
func (t *target) pickUsageSource(ctx context.Context, pid int) usageSource {
	if pid == 0 {
		pid = localPIDForURL(t.base)
	}
	if pid > 0 {
		if _, _, err := (procSource{pid}).read(ctx); err == nil {
			return procSource{pid}
		}
	}
	if _, _, err := (metricsSource{t}).read(ctx); err == nil {
		return metricsSource{t}
	}
	return nil
}

// usageMonitor samples a source every second between start and stop.
type usageMonitor struct {
	src  usageSource
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	t    []time.Time
	cpu  []float64
	rss  []float64
	// the machine's CPU ticks (/proc/stat) at the first and last sample
	stat0, stat1 cpuTicks
}

// cpuTicks is the first line of /proc/stat: all CPU time, and the part
// the host stole.
type cpuTicks struct{ total, steal uint64 }

func readCPUTicks() (cpuTicks, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTicks{}, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return parseCPUTicks(line)
}

func parseCPUTicks(line string) (cpuTicks, bool) {
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return cpuTicks{}, false
	}
	var t cpuTicks
	for i, v := range f[1:] {
		if i >= 8 { // guest time is already in user and nice
			break
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return cpuTicks{}, false
		}
		t.total += n
		if i == 7 {
			t.steal = n
		}
	}
	return t, true
}

// stealPercent is the host's share of the CPU time between a and b; -1
// when unknown.
func stealPercent(a, b cpuTicks) float64 {
	if b.total <= a.total || b.steal < a.steal {
		return -1
	}
	return 100 * float64(b.steal-a.steal) / float64(b.total-a.total)
}

// startUsage begins sampling at from (the end of warm-up), so that the
// figures cover the measured window only.
func startUsage(ctx context.Context, src usageSource, from time.Time) *usageMonitor {
	m := &usageMonitor{src: src, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		if src == nil {
			return
		}
		select {
		case <-time.After(time.Until(from)):
		case <-m.stop:
			return
		case <-ctx.Done():
			return
		}
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			m.sample(ctx)
			select {
			case <-m.stop:
				m.sample(ctx)
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return m
}

func (m *usageMonitor) sample(ctx context.Context) {
	if t, ok := readCPUTicks(); ok {
		m.mu.Lock()
		if m.stat0.total == 0 {
			m.stat0 = t
		}
		m.stat1 = t
		m.mu.Unlock()
	}
	cpu, rss, err := m.src.read(ctx)
	if err != nil {
		return
	}
	m.mu.Lock()
	m.t = append(m.t, time.Now())
	m.cpu = append(m.cpu, cpu)
	m.rss = append(m.rss, rss)
	m.mu.Unlock()
}

// finish stops sampling and summarises the window.
func (m *usageMonitor) finish() ServerUsage {
	close(m.stop)
	<-m.done
	if m.src == nil {
		return ServerUsage{Source: "none", StealPercent: -1}
	}
	u := ServerUsage{Source: m.src.name(), Samples: len(m.t), StealPercent: stealPercent(m.stat0, m.stat1)}
	if p, ok := m.src.(procSource); ok {
		u.PID = p.pid
	}
	return summarizeUsage(u, m.t, m.cpu, m.rss)
}

func summarizeUsage(u ServerUsage, ts []time.Time, cpu, rss []float64) ServerUsage {
	n := len(ts)
	if n == 0 {
		return u
	}
	var sum float64
	for _, r := range rss {
		sum += r
		u.RSSPeakMB = max(u.RSSPeakMB, r/(1<<20))
	}
	u.RSSMeanMB = sum / float64(n) / (1 << 20)
	if n >= 2 {
		u.CPUSeconds = cpu[n-1] - cpu[0]
		u.CPUPercent = 100 * Rate(u.CPUSeconds, ts[n-1].Sub(ts[0]))
	}
	return u
}

// localPIDForURL finds the process listening on the base URL's port when the
// host is loopback; 0 when unknown (other host, no permission, not Linux).
func localPIDForURL(base string) int {
	u, err := url.Parse(base)
	if err != nil {
		return 0
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	ip := net.ParseIP(host)
	if host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return 0
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return 0
	}
	var inodes []string
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		if b, err := os.ReadFile(f); err == nil {
			inodes = append(inodes, listenInodes(string(b), p)...)
		}
	}
	if len(inodes) == 0 {
		return 0
	}
	return pidForInodes(inodes)
}

// listenInodes returns the socket inodes in LISTEN state (0A) on port from a
// /proc/net/tcp{,6} table.
func listenInodes(table string, port int) []string {
	var out []string
	want := fmt.Sprintf(":%04X", port)
	for _, line := range strings.Split(table, "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 10 || f[3] != "0A" || !strings.HasSuffix(f[1], want) {
			continue
		}
		out = append(out, f[9])
	}
	return out
}

func pidForInodes(inodes []string) int {
	want := map[string]bool{}
	for _, in := range inodes {
		want["socket:["+in+"]"] = true
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*/fd")
	for _, d := range dirs {
		fds, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if l, err := os.Readlink(filepath.Join(d, fd.Name())); err == nil && want[l] {
				pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(d)))
				return pid
			}
		}
	}
	return 0
}
