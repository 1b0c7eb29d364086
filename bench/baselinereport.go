package bench

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
)

// What the gateway may add to the time to first audio byte over a bare
// fasthttp server sending the same bytes, for every transport: at one
// stream, p50 and p99; at baselineLoadedLevel streams, p99.
const (
	baselineAddedP50Ms       = 0.1
	baselineAddedP99Ms       = 0.5
	baselineLoadedLevel      = 64
	baselineLoadedAddedP99Ms = 1.0
)

// BaselineRow is one transport at one level of a baseline run: the medians
// over the rounds of each side's TTFB percentiles, what voicesvc adds over
// the bare server and the ratio of the two.
type BaselineRow struct {
	Transport               string
	Concurrency             int
	Rounds                  int
	BareP50, SvcP50         float64 // ms
	BareP99, SvcP99         float64 // ms
	AddedP50, AddedP99      float64 // ms, voicesvc - bare
	RatioP50, RatioP99      float64 // voicesvc / bare; 0 when bare is 0
	BareErrors, SvcErrors   int
	BareSamples, SvcSamples int  // TTFB samples over the rounds
	Paced                   bool // realtime listeners (Options.Pace)
}

// HasBaseline reports whether run holds bare-server results.
func HasBaseline(run *Run) bool {
	for _, r := range run.Results {
		if strings.HasPrefix(r.Scenario, barePrefix) {
			return true
		}
	}
	return false
}

// BaselineOf pairs each bare-<transport> result group with <transport> at
// the same level, in transport order, then by level. A pair where one side
// has no TTFB sample at all is left out (its errors show in the run's
// table).
func BaselineOf(run *Run) []BaselineRow {
	type key struct {
		scn string
		c   int
	}
	type group struct{ bare, svc []*Result }
	groups := map[key]*group{}
	var keys []key
	for _, r := range run.Results {
		scn, bare := strings.CutPrefix(r.Scenario, barePrefix)
		k := key{scn, r.Concurrency}
		g := groups[k]
		if g == nil {
			g = &group{}
			groups[k] = g
			keys = append(keys, k)
		}
		if bare {
			g.bare = append(g.bare, r)
		} else {
			g.svc = append(g.svc, r)
		}
	}
	order := func(s string) int {
		for i, x := range Scenarios {
			if x == s {
				return i
			}
		}
		return len(Scenarios)
	}
	sort.SliceStable(keys, func(i, j int) bool {
		if keys[i].scn != keys[j].scn {
			return order(keys[i].scn) < order(keys[j].scn)
		}
		return keys[i].c < keys[j].c
	})
	var out []BaselineRow
	for _, k := range keys {
		g := groups[k]
		bare, svc := withTTFB(g.bare), withTTFB(g.svc)
		if len(bare) == 0 || len(svc) == 0 {
			continue
		}
		row := BaselineRow{Transport: k.scn, Concurrency: k.c, Rounds: min(len(g.bare), len(g.svc)),
			BareP50: medianOf(bare, func(r *Result) float64 { return r.TTFB.P50 }),
			SvcP50:  medianOf(svc, func(r *Result) float64 { return r.TTFB.P50 }),
			BareP99: medianOf(bare, func(r *Result) float64 { return r.TTFB.P99 }),
			SvcP99:  medianOf(svc, func(r *Result) float64 { return r.TTFB.P99 }),
		}
		row.AddedP50, row.AddedP99 = row.SvcP50-row.BareP50, row.SvcP99-row.BareP99
		row.RatioP50, row.RatioP99 = ratio(row.SvcP50, row.BareP50), ratio(row.SvcP99, row.BareP99)
		for _, r := range g.bare {
			row.BareErrors += r.ErrorCount
			row.BareSamples += r.TTFB.N
		}
		for _, r := range g.svc {
			row.SvcErrors += r.ErrorCount
			row.SvcSamples += r.TTFB.N
			row.Paced = row.Paced || r.Paced
		}
		out = append(out, row)
	}
	return out
}

func withTTFB(rs []*Result) []*Result {
	var out []*Result
	for _, r := range rs {
		if r.TTFB.N > 0 {
			out = append(out, r)
		}
	}
	return out
}

func ratio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}

// baselineBounds are the added-TTFB bounds at a level: NaN where there is
// none.
func baselineBounds(c int) (p50, p99 float64) {
	switch c {
	case 1:
		return baselineAddedP50Ms, baselineAddedP99Ms
	case baselineLoadedLevel:
		return math.NaN(), baselineLoadedAddedP99Ms
	}
	return math.NaN(), math.NaN()
}

// Met reports whether the row is within its level's bounds, and whether the
// level has any.
func (b BaselineRow) Met() (met, bounded bool) {
	p50, p99 := baselineBounds(b.Concurrency)
	if math.IsNaN(p50) && math.IsNaN(p99) {
		return false, false
	}
	met = b.BareErrors == 0 && b.SvcErrors == 0
	if !math.IsNaN(p50) && b.AddedP50 > p50 {
		met = false
	}
	if !math.IsNaN(p99) && b.AddedP99 > p99 {
		met = false
	}
	return met, true
}

// WriteBaseline writes the table of BaselineOf; nothing without bare
// results.
func WriteBaseline(w io.Writer, run *Run) {
	rows := BaselineOf(run)
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "\nTime to first audio byte, a bare fasthttp server sending voicesvc's bytes and voicesvc: "+
		"medians over %d round(s); added = voicesvc - bare, ratio = voicesvc / bare\n\n", rows[0].Rounds)
	fmt.Fprintf(w, "| transport | streams | bare p50 | voicesvc p50 | added p50 | ratio p50 | bare p99 | voicesvc p99 | added p99 | ratio p99 | errors bare/voicesvc | within bounds |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, b := range rows {
		fmt.Fprintf(w, "| %s | %d | %.3f ms | %.3f ms | %+.3f ms | %.2fx | %.3f ms | %.3f ms | %+.3f ms | %.2fx | %d/%d | %s |\n",
			b.Transport, b.Concurrency, b.BareP50, b.SvcP50, b.AddedP50, b.RatioP50,
			b.BareP99, b.SvcP99, b.AddedP99, b.RatioP99, b.BareErrors, b.SvcErrors, b.boundCell())
	}
}

func (b BaselineRow) boundCell() string {
	met, bounded := b.Met()
	if !bounded {
		return "-"
	}
	return yesNo(met)
}

// writeBaselineTargets adds the baseline's rows to bench summary's targets.
func writeBaselineTargets(w io.Writer, run *Run) {
	rows := BaselineOf(run)
	if len(rows) == 0 {
		fmt.Fprintf(w, "| gateway-added TTFB over a bare fasthttp server | not run | - |\n")
		return
	}
	for _, b := range rows {
		p50, p99 := baselineBounds(b.Concurrency)
		if math.IsNaN(p50) && math.IsNaN(p99) {
			continue
		}
		var bounds []string
		if !math.IsNaN(p50) {
			bounds = append(bounds, fmt.Sprintf("p50 <= %g ms", p50))
		}
		bounds = append(bounds, fmt.Sprintf("p99 <= %g ms", p99))
		met, _ := b.Met()
		load := fmt.Sprint(b.Concurrency)
		if b.Paced {
			load += " realtime listeners"
		}
		fmt.Fprintf(w, "| %s: gateway-added TTFB over a bare fasthttp server at %s, %s | added p50 %+.3f ms (%.2fx), p99 %+.3f ms (%.2fx); bare p50 %.3f, p99 %.3f ms; errors %d/%d | %s |\n",
			b.Transport, load, strings.Join(bounds, ", "), b.AddedP50, b.RatioP50, b.AddedP99, b.RatioP99,
			b.BareP50, b.BareP99, b.BareErrors, b.SvcErrors, yesNo(met))
	}
}
