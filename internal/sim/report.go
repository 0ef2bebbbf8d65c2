package sim

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is what `berth simulate` shows: the trace and every policy's
// result.
type Report struct {
	Trace   string    `json:"trace"`
	Start   time.Time `json:"start"`
	Source  string    `json:"source,omitempty"`
	Results []*Result `json:"results"`
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes the policies side by side, one column each.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	row := func(label string, cell func(*Result) string) {
		_, _ = fmt.Fprintf(tw, "%s\t", label)
		for _, res := range r.Results {
			_, _ = fmt.Fprintf(tw, "%s\t", cell(res))
		}
		_, _ = fmt.Fprintln(tw)
	}
	row("POLICY", func(x *Result) string { return x.Policy })
	row("simulated", func(x *Result) string { return (time.Duration(x.Seconds) * time.Second).String() })
	row("cost", func(x *Result) string { return fmt.Sprintf("%.2f", x.Cost) })
	row("cost/hour", func(x *Result) string { return fmt.Sprintf("%.3f", x.CostPerHour) })
	row("headroom share", func(x *Result) string { return fmt.Sprintf("%.1f%%", 100*x.HeadroomShare) })
	row("running at start", func(x *Result) string { return fmt.Sprint(x.RunningAtStart) })
	row("nodes at start", func(x *Result) string { return fmt.Sprint(x.NodesAtStart) })
	row("pods", func(x *Result) string { return fmt.Sprint(x.Pods) })
	row("  recreated", func(x *Result) string { return fmt.Sprint(x.Recreated) })
	row("pods waited", func(x *Result) string { return fmt.Sprint(x.PodsWaited) })
	row("  for a launch", func(x *Result) string { return fmt.Sprint(x.PodsWaitedForLaunch) })
	row("  unbound at end", func(x *Result) string { return fmt.Sprint(x.Unbound) })
	row("  deleted unbound", func(x *Result) string { return fmt.Sprint(x.DeletedUnbound) })
	if slices.ContainsFunc(r.Results, func(x *Result) bool { return x.Target != nil }) {
		row("target", func(x *Result) string {
			if x.Target == nil {
				return "-"
			}
			return fmt.Sprintf("%d%% <= %s", x.Target.Percent, seconds(x.Target.Wait))
		})
		row("  within target", func(x *Result) string {
			if x.Target == nil {
				return "-"
			}
			met := "missed"
			if x.Target.Met {
				met = "met"
			}
			return fmt.Sprintf("%.1f%% %s", 100*x.Target.Within, met)
		})
		row("  units at end", func(x *Result) string {
			if x.Target == nil {
				return "-"
			}
			return fmt.Sprintf("%d (%s)", x.Target.Units, x.Target.Phase)
		})
	}
	row("wait p50", func(x *Result) string { return seconds(x.Wait.P50) })
	row("wait p95", func(x *Result) string { return seconds(x.Wait.P95) })
	row("wait p99", func(x *Result) string { return seconds(x.Wait.P99) })
	row("wait max", func(x *Result) string { return seconds(x.Wait.Max) })
	row("all pods p99", func(x *Result) string { return seconds(x.WaitAll.P99) })
	row("launches", func(x *Result) string { return fmt.Sprint(x.Launches) })
	row("  for headroom", func(x *Result) string { return fmt.Sprint(x.LaunchesForHeadroom) })
	row("removals", func(x *Result) string { return fmt.Sprint(x.Removals) })
	row("drains", func(x *Result) string { return fmt.Sprint(x.Drains) })
	row("evictions", func(x *Result) string { return fmt.Sprint(x.Evictions) })
	row("replacements", func(x *Result) string { return fmt.Sprint(x.Replacements) })
	row("preemptions", func(x *Result) string { return fmt.Sprint(x.Preemptions) })
	if err := tw.Flush(); err != nil {
		return err
	}
	// Node-hours by type, one line per type and policy.
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "\nPOLICY\tINSTANCE TYPE\tCAPACITY\tNODE-HOURS")
	for _, res := range r.Results {
		for _, h := range res.NodeHours {
			_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f\n", res.Policy, h.InstanceType, h.CapacityType, h.Hours)
		}
	}
	return tw.Flush()
}

func seconds(s float64) string {
	switch {
	case s == 0:
		return "0s"
	case s < 10:
		return fmt.Sprintf("%.1fs", s)
	default:
		return (time.Duration(math.Round(s)) * time.Second).String()
	}
}

// WriteHTML writes a self-contained page (no script, no network): the
// table and SVG charts of nodes, pending pods, cost per hour and headroom
// units over time, and the wait-time distribution, one line per policy.
func (r *Report) WriteHTML(w io.Writer) error {
	var table strings.Builder
	if err := r.WriteTable(&table); err != nil {
		return err
	}
	series := func(f func(Sample) float64) []line {
		out := make([]line, 0, len(r.Results))
		for i, res := range r.Results {
			l := line{Name: res.Policy, Color: palette[i%len(palette)]}
			for _, s := range res.Series {
				l.Points = append(l.Points, xy{s.At / 3600, f(s)})
			}
			out = append(out, l)
		}
		return out
	}
	cdf := make([]line, 0, len(r.Results))
	for i, res := range r.Results {
		l := line{Name: res.Policy, Color: palette[i%len(palette)], Step: true}
		for _, p := range res.WaitCDF {
			l.Points = append(l.Points, xy{p.Seconds, 100 * p.Fraction})
		}
		cdf = append(cdf, l)
	}
	charts := []chart{
		{ID: "nodes", Title: "Nodes", X: "hours", Y: "nodes", Lines: series(func(s Sample) float64 { return float64(s.Nodes) })},
		{ID: "pending", Title: "Pods waiting for a node", X: "hours", Y: "pods", Lines: series(func(s Sample) float64 { return float64(s.Pending) })},
		{ID: "cost", Title: "Cost per hour", X: "hours", Y: "per hour", Lines: series(func(s Sample) float64 { return s.CostPerHour })},
		{ID: "headroom", Title: "Headroom units ready", X: "hours", Y: "units", Lines: series(func(s Sample) float64 { return float64(s.HeadroomReady) })},
		{ID: "wait", Title: "Wait for capacity, pods that waited (cumulative)", X: "seconds", Y: "% of pods", Lines: cdf},
	}
	var svgs []template.HTML
	for _, c := range charts {
		svgs = append(svgs, c.svg())
	}
	return page.Execute(w, map[string]any{"R": r, "Table": table.String(), "Charts": svgs})
}

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"}

type xy struct{ X, Y float64 }

type line struct {
	Name   string
	Color  string
	Points []xy
	// Step draws a step function (a distribution).
	Step bool
}

type chart struct {
	ID, Title, X, Y string
	Lines           []line
}

const (
	chartW, chartH                     = 760, 260
	padLeft, padRight, padTop, padBott = 60, 150, 30, 40
)

// svg draws the chart: axes with ticks, a polyline per line, a legend.
// Every polyline carries data-points (the browser check counts them).
func (c chart) svg() template.HTML {
	maxX, maxY := 0.0, 0.0
	points := 0
	for _, l := range c.Lines {
		for _, p := range l.Points {
			maxX, maxY = math.Max(maxX, p.X), math.Max(maxY, p.Y)
		}
		points += len(l.Points)
	}
	maxX, stepX := niceAxis(maxX)
	maxY, stepY := niceAxis(maxY)
	pw, ph := float64(chartW-padLeft-padRight), float64(chartH-padTop-padBott)
	px := func(x float64) float64 { return padLeft + x/maxX*pw }
	py := func(y float64) float64 { return padTop + ph - y/maxY*ph }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" id="%s" data-points="%d" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s">`,
		c.ID, points, chartW, chartH, chartW, chartH, template.HTMLEscapeString(c.Title))
	fmt.Fprintf(&b, `<text x="%d" y="18" class="title">%s</text>`, padLeft, template.HTMLEscapeString(c.Title))
	// axes and ticks
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" class="axis"/>`, padLeft, padTop, padLeft, chartH-padBott)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" class="axis"/>`, padLeft, chartH-padBott, chartW-padRight, chartH-padBott)
	for x := 0.0; x <= maxX+stepX/2; x += stepX {
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" class="tick" text-anchor="middle">%s</text>`, px(x), chartH-padBott+16, tick(x))
	}
	for y := 0.0; y <= maxY+stepY/2; y += stepY {
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" class="tick" text-anchor="end">%s</text>`, padLeft-6, py(y)+4, tick(y))
		if y > 0 {
			fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" class="grid"/>`, padLeft, py(y), chartW-padRight, py(y))
		}
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" class="tick" text-anchor="middle">%s</text>`, padLeft+int(pw/2), chartH-6, c.X)
	fmt.Fprintf(&b, `<text x="12" y="%d" class="tick" transform="rotate(-90 12 %d)" text-anchor="middle">%s</text>`, padTop+int(ph/2), padTop+int(ph/2), c.Y)
	for i, l := range c.Lines {
		var pts strings.Builder
		prevY := 0.0
		for k, p := range l.Points {
			if l.Step && k > 0 {
				fmt.Fprintf(&pts, "%.1f,%.1f ", px(p.X), py(prevY))
			}
			fmt.Fprintf(&pts, "%.1f,%.1f ", px(p.X), py(p.Y))
			prevY = p.Y
		}
		fmt.Fprintf(&b, `<polyline data-points="%d" fill="none" stroke="%s" stroke-width="1.6" points="%s"><title>%s</title></polyline>`,
			len(l.Points), l.Color, strings.TrimSpace(pts.String()), template.HTMLEscapeString(l.Name))
		ly := padTop + 14*i
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/>`, chartW-padRight+12, ly, chartW-padRight+30, ly, l.Color)
		fmt.Fprintf(&b, `<text x="%d" y="%d" class="tick">%s</text>`, chartW-padRight+36, ly+4, template.HTMLEscapeString(l.Name))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) //nolint:gosec // built from escaped text and numbers above
}

// niceAxis returns an axis end and a tick step for values up to v: a
// step of 1, 2, 2.5 or 5 times a power of ten, four to six ticks.
func niceAxis(v float64) (end, step float64) {
	if v <= 0 {
		return 1, 0.25
	}
	raw := v / 5
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	step = 10 * p
	for _, m := range []float64{1, 2, 2.5, 5} {
		if m*p >= raw {
			step = m * p
			break
		}
	}
	return math.Ceil(v/step-1e-9) * step, step
}

func tick(v float64) string {
	return strconvFloat(math.Round(v*1000) / 1000)
}

func strconvFloat(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

var page = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>berth simulate</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:980px}
pre{background:#f6f6f6;padding:1em;overflow:auto}
svg.chart{display:block;margin:1.5em 0;background:#fff}
.axis{stroke:#444}.grid{stroke:#ddd}.tick{font-size:11px;fill:#444}.title{font-size:14px;font-weight:600}
</style></head><body>
<h1>berth simulate</h1>
<p>Trace <code>{{.R.Trace}}</code>{{if .R.Source}} ({{.R.Source}}){{end}}, from {{.R.Start.Format "2006-01-02 15:04 MST"}}; {{len .R.Results}} {{if eq (len .R.Results) 1}}policy{{else}}policies{{end}}.</p>
<pre>{{.Table}}</pre>
{{range .Charts}}{{.}}
{{end}}
<p>Wait for capacity is from a pod's creation to its binding, for pods whose first scheduling attempt found no node; cost is the price of the nodes from launch to removal. See docs/simulate.md.</p>
</body></html>
`))
