package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Run is one invocation of the bench: what results.json holds.
type Run struct {
	Tool      string    `json:"tool"`
	Version   int       `json:"version"`
	StartedAt time.Time `json:"started_at"`
	BaseURL   string    `json:"base_url"`
	Engine    string    `json:"engine"`
	Voice     string    `json:"voice"`
	Host      HostInfo  `json:"host"`
	Args      []string  `json:"args,omitempty"`
	Results   []*Result `json:"results"`
}

// HostInfo describes the machine the bench ran on, which bounds what it can
// measure (the client shares the cores with a local server).
type HostInfo struct {
	GOOS      string `json:"goos"`
	GOARCH    string `json:"goarch"`
	CPUs      int    `json:"cpus"`
	GoVersion string `json:"go_version"`
}

// Result holds the figures of one scenario at one load level.
type Result struct {
	Scenario string `json:"scenario"`
	Mode     string `json:"mode"` // "closed" or "open"
	// Paced (closed loop): each worker starts its next operation no sooner
	// than the previous one's audio has played out, like a listener.
	Paced       bool    `json:"paced,omitempty"`
	Concurrency int     `json:"concurrency"`
	Rate        float64 `json:"rate,omitempty"`     // arrivals per second, open loop
	Contexts    int     `json:"contexts,omitempty"` // ws contexts per session
	Sessions    int     `json:"sessions,omitempty"` // ws sessions
	TextMode    string  `json:"text_mode,omitempty"`
	TPS         float64 `json:"tokens_per_second,omitempty"`
	Format      string  `json:"format"`
	TextChars   int     `json:"text_chars"`

	Warmup     float64 `json:"warmup_s"`
	Elapsed    float64 `json:"elapsed_s"` // measured window incl. drain
	Operations int     `json:"operations"`
	OK         int     `json:"ok"`
	ErrorCount int     `json:"error_count"`
	// Errors counts failures by "status code" (HTTP), "sse:<code>",
	// "ws:<code>", "client:<reason>".
	Errors map[string]int `json:"errors"`
	// Refused counts operations the server turned away for capacity
	// (503 upstream_busy; ws: task_failed upstream_busy before any audio,
	// or a handshake answered 503 upstream_busy): neither ok nor errors.
	// Refusal is the time from the request (task_start, handshake) to
	// that answer.
	Refused int  `json:"refused,omitempty"`
	Refusal Dist `json:"refusal_ms"`
	// Overload marks a level of the overload probe: realtime streams at
	// Factor times the capacity figure Capacity (streams).
	Overload *Overload `json:"overload,omitempty"`

	TTFB  Dist `json:"ttfb_ms"`
	Total Dist `json:"total_ms"`
	Gap   Dist `json:"gap_ms"` // sse and ws only
	// ServerTTFB is the server's own TTFB where it reports one (ws:
	// task_start read to first chunk queued); TTFB minus it is what the
	// socket, the server's read and write paths and the client add.
	ServerTTFB Dist `json:"server_ttfb_ms"`

	RTFp50       float64 `json:"rtf_p50"`
	RTFAggregate float64 `json:"rtf_aggregate"`
	AudioSeconds float64 `json:"audio_seconds"`
	AudioPerSec  float64 `json:"audio_seconds_per_second"`
	Throughput   float64 `json:"ops_per_second"`

	Server ServerUsage `json:"server"`

	// Note flags a level whose figures cannot be trusted, such as one where
	// no operation started inside the measured window.
	Note string `json:"note,omitempty"`

	// ttfbRaw keeps the TTFB samples for the plots; too bulky for JSON.
	ttfbRaw []float64
}

// Overload is the capacity figure an overload level was a multiple of.
type Overload struct {
	Capacity int     `json:"capacity_streams"`
	Factor   float64 `json:"factor"`
}

// Load is the load level of a result in its own unit (concurrency or rate),
// the x axis of sweep plots.
func (r *Result) Load() float64 {
	if r.Mode == "open" {
		return r.Rate
	}
	return float64(r.Concurrency)
}

// LoadLabel names the load level for tables.
func (r *Result) LoadLabel() string {
	if r.Mode == "open" {
		return fmt.Sprintf("%g/s", r.Rate)
	}
	rt := ""
	if r.Paced {
		rt = " realtime"
	}
	if r.Overload != nil {
		rt += fmt.Sprintf(" overload %gx", r.Overload.Factor)
	}
	if r.Scenario == "ws" {
		return fmt.Sprintf("c=%d (%dx%d)%s", r.Concurrency, r.Sessions, r.Contexts, rt)
	}
	return fmt.Sprintf("c=%d%s", r.Concurrency, rt)
}

// ServerUsage is the server's resource use over the measured window.
type ServerUsage struct {
	Source     string  `json:"source"` // "proc", "metrics" or "none"
	PID        int     `json:"pid,omitempty"`
	CPUSeconds float64 `json:"cpu_seconds"`
	CPUPercent float64 `json:"cpu_percent"` // of one core; 200 = two cores busy
	RSSPeakMB  float64 `json:"rss_peak_mb"`
	RSSMeanMB  float64 `json:"rss_mean_mb"`
	Samples    int     `json:"samples"`
	// StealPercent is the share of this machine's CPU time its host took
	// over the window (steal in /proc/stat; -1 unknown). On a virtual
	// machine a few percent is enough to put milliseconds into every tail
	// figure: those figures then measure the host, not the server.
	StealPercent float64 `json:"steal_percent"`
}

// WriteJSON writes the run as indented JSON to path.
func (run *Run) WriteJSON(path string) error {
	b, err := json.MarshalIndent(run, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// ReadRun loads results.json, or DIR/results.json when path is a directory.
func ReadRun(path string) (*Run, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, "results.json")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var run Run
	if err := json.Unmarshal(b, &run); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &run, nil
}
