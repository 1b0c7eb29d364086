package bench

import (
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// figure is one written plot, for the report to embed.
type figure struct {
	File  string
	Title string
}

// loadSlug names a load level in file names: c16 (closed) or r50 (open).
func loadSlug(r *Result) string {
	if r.Mode == "open" {
		return "r" + strconv.FormatFloat(r.Rate, 'f', -1, 64)
	}
	if r.Paced {
		return "c" + strconv.Itoa(r.Concurrency) + "rt"
	}
	return "c" + strconv.Itoa(r.Concurrency)
}

var unsafeName = regexp.MustCompile(`[^a-zA-Z0-9]+`)

func fileSlug(parts ...string) string {
	s := ""
	for i, p := range parts {
		if i > 0 {
			s += "_"
		}
		s += unsafeName.ReplaceAllString(p, "")
	}
	return s
}

// writePlots writes every PNG of the run into dir and returns them in report
// order: per scenario a TTFB histogram per level, a CDF across levels, and
// when a sweep ran, latency against offered load; then one overview across
// scenarios.
func writePlots(dir string, run *Run) ([]figure, error) {
	var figs []figure
	byScn := map[string][]*Result{}
	var order []string
	for _, r := range run.Results {
		// Realtime-paced levels are their own series: the same concurrency
		// asks a different question.
		k := r.Scenario
		if r.Paced {
			k += " realtime"
		}
		if _, ok := byScn[k]; !ok {
			order = append(order, k)
		}
		byScn[k] = append(byScn[k], r)
	}
	save := func(p *plot.Plot, name, title string) error {
		if err := p.Save(16*vg.Centimeter, 10*vg.Centimeter, filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("plot %s: %w", name, err)
		}
		figs = append(figs, figure{File: name, Title: title})
		return nil
	}
	for _, scn := range order {
		rs := byScn[scn]
		for _, r := range rs {
			if len(r.ttfbRaw) < 2 {
				continue
			}
			p, err := histPlot(r)
			if err != nil {
				return figs, err
			}
			if err := save(p, fileSlug("hist", scn, loadSlug(r))+".png", fmt.Sprintf("%s %s: TTFB histogram", scn, r.LoadLabel())); err != nil {
				return figs, err
			}
		}
		if p, ok := cdfPlot(scn, rs); ok {
			if err := save(p, fileSlug("cdf", scn)+".png", scn+": TTFB CDF"); err != nil {
				return figs, err
			}
		}
		if len(rs) >= 2 {
			if err := save(loadPlot(scn, rs), fileSlug("load", scn)+".png", scn+": latency against offered load"); err != nil {
				return figs, err
			}
		}
	}
	if len(order) >= 2 && len(run.Results) > len(order) {
		if err := save(overviewPlot(order, byScn), "load_all.png", "TTFB p99 against load, all transports"); err != nil {
			return figs, err
		}
	}
	return figs, nil
}

func histPlot(r *Result) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s %s: time to first audio", r.Scenario, r.LoadLabel())
	p.X.Label.Text = "TTFB (ms)"
	p.Y.Label.Text = "operations"
	bins := max(5, min(50, int(math.Sqrt(float64(len(r.ttfbRaw))))))
	h, err := plotter.NewHist(plotter.Values(r.ttfbRaw), bins)
	if err != nil {
		return nil, err
	}
	p.Add(h)
	return p, nil
}

// cdfPlot draws the empirical CDF of TTFB per load level.
func cdfPlot(scn string, rs []*Result) (*plot.Plot, bool) {
	p := plot.New()
	p.Title.Text = scn + ": TTFB cumulative distribution"
	p.X.Label.Text = "TTFB (ms)"
	p.Y.Label.Text = "fraction of operations"
	p.Legend.Top = false
	p.Legend.Left = false
	drawn := false
	for i, r := range rs {
		n := len(r.ttfbRaw)
		if n == 0 {
			continue
		}
		pts := make(plotter.XYs, n)
		for j, v := range r.ttfbRaw {
			pts[j] = plotter.XY{X: v, Y: float64(j+1) / float64(n)}
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			continue
		}
		l.Color = plotutil.Color(i)
		p.Add(l)
		p.Legend.Add(r.LoadLabel(), l)
		drawn = true
	}
	p.Add(plotter.NewGrid())
	return p, drawn
}

// loadAxis labels the x axis with the measured levels; log scale when the
// sweep spans a decade or more (1, 16, 64, 256 would crowd a linear axis).
func loadAxis(p *plot.Plot, rs []*Result) {
	p.X.Label.Text = "concurrency"
	if rs[0].Mode == "open" {
		p.X.Label.Text = "offered load (arrivals/s)"
	}
	lo, hi := math.Inf(1), 0.0
	var ticks []plot.Tick
	for _, r := range rs {
		lo, hi = min(lo, r.Load()), max(hi, r.Load())
		ticks = append(ticks, plot.Tick{Value: r.Load(), Label: strconv.FormatFloat(r.Load(), 'g', 4, 64)})
	}
	if lo > 0 && hi/lo >= 10 {
		p.X.Scale = plot.LogScale{}
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
}

func loadPlot(scn string, rs []*Result) *plot.Plot {
	p := plot.New()
	p.Title.Text = scn + ": latency against load"
	p.Y.Label.Text = "ms"
	loadAxis(p, rs)
	series := []struct {
		name string
		get  func(*Result) (float64, bool)
	}{
		{"TTFB p50", func(r *Result) (float64, bool) { return r.TTFB.P50, r.TTFB.N > 0 }},
		{"TTFB p99", func(r *Result) (float64, bool) { return r.TTFB.P99, r.TTFB.N > 0 }},
		{"gap p99", func(r *Result) (float64, bool) { return r.Gap.P99, r.Gap.N > 0 }},
	}
	for i, s := range series {
		var pts plotter.XYs
		for _, r := range rs {
			if v, ok := s.get(r); ok {
				pts = append(pts, plotter.XY{X: r.Load(), Y: v})
			}
		}
		addLine(p, s.name, pts, i)
	}
	p.Add(plotter.NewGrid())
	return p
}

func overviewPlot(order []string, byScn map[string][]*Result) *plot.Plot {
	p := plot.New()
	p.Title.Text = "TTFB p99 against load"
	p.Y.Label.Text = "ms"
	var all []*Result
	for _, scn := range order {
		all = append(all, byScn[scn]...)
	}
	loadAxis(p, all)
	for i, scn := range order {
		var pts plotter.XYs
		for _, r := range byScn[scn] {
			if r.TTFB.N > 0 {
				pts = append(pts, plotter.XY{X: r.Load(), Y: r.TTFB.P99})
			}
		}
		addLine(p, scn, pts, i)
	}
	p.Add(plotter.NewGrid())
	return p
}

func addLine(p *plot.Plot, name string, pts plotter.XYs, i int) {
	if len(pts) == 0 {
		return
	}
	l, s, err := plotter.NewLinePoints(pts)
	if err != nil {
		return
	}
	l.Color, s.Color = plotutil.Color(i), plotutil.Color(i)
	s.Shape = plotutil.Shape(i)
	p.Add(l, s)
	p.Legend.Add(name, l, s)
}
