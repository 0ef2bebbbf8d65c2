// Command promcheck validates the PromQL of berth's chart the way promtool
// would: every expression parses with Prometheus' own parser, and every
// metric it selects is one berth's controller registers. It reads JSON on
// standard input ({"metrics": [...], "exprs": [{"where", "expr"}]}),
// prints each problem, and exits 1 if there is one. test/chart runs it; it
// is a module of its own because Prometheus' module requires newer
// Kubernetes libraries than berth's.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/prometheus/prometheus/promql/parser"
)

// Input is what test/chart sends.
type Input struct {
	// Metrics are the series names the controller's registry exposes
	// (histograms with their _bucket, _sum and _count).
	Metrics []string `json:"metrics"`
	Exprs   []Expr   `json:"exprs"`
}

// Expr is one expression and where it comes from.
type Expr struct {
	Where string `json:"where"`
	Expr  string `json:"expr"`
}

func main() {
	var in Input
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		fmt.Fprintln(os.Stderr, "reading input:", err)
		os.Exit(2)
	}
	problems := Check(in)
	report(os.Stdout, in, problems)
	if len(problems) > 0 {
		os.Exit(1)
	}
}

func report(w io.Writer, in Input, problems []string) {
	for _, p := range problems {
		_, _ = fmt.Fprintln(w, p)
	}
	_, _ = fmt.Fprintf(w, "%d expressions checked, %d problems\n", len(in.Exprs), len(problems))
}

// Check parses every expression and names what is wrong with each.
func Check(in Input) []string {
	known := map[string]bool{}
	for _, m := range in.Metrics {
		known[m] = true
	}
	p := parser.NewParser(parser.Options{})
	var problems []string
	for _, e := range in.Exprs {
		expr, err := p.ParseExpr(e.Expr)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", e.Where, err))
			continue
		}
		names := 0
		parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
			vs, ok := node.(*parser.VectorSelector)
			if !ok {
				return nil
			}
			names++
			if vs.Name == "" {
				problems = append(problems, fmt.Sprintf("%s: a selector without a metric name: %s", e.Where, vs))
			} else if !known[vs.Name] {
				problems = append(problems, fmt.Sprintf("%s: metric %s is not registered by berth's controller", e.Where, vs.Name))
			}
			return nil
		})
		if names == 0 && !strings.Contains(e.Expr, "vector(") {
			problems = append(problems, fmt.Sprintf("%s: selects no metric", e.Where))
		}
	}
	return problems
}
