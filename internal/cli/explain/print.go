package explain

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"sigs.k8s.io/yaml"
)

// writers print an explanation in each --output format.
var writers = map[string]func(io.Writer, Explanation) error{
	"text": writeText,
	"json": writeJSON,
	"yaml": writeYAML,
}

func writeJSON(w io.Writer, e Explanation) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(e)
}

func writeYAML(w io.Writer, e Explanation) error {
	out, err := yaml.Marshal(e)
	if err != nil {
		return err
	}
	_, err = w.Write(out)
	return err
}

// writeText prints the explanation for a reader: the decision and its rule
// first, then what to change, then the details.
func writeText(w io.Writer, e Explanation) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s\n", e.Kind, e.Name)
	decision := string(e.Decision)
	if e.Reason != "" {
		decision += " (" + e.Reason + ")"
	}
	fmt.Fprintf(&b, "Decision: %s\n", decision)
	fmt.Fprintf(&b, "Why:      %s\n", e.Message)
	for _, l := range e.Launch {
		fmt.Fprintf(&b, "Launch:   %s %s in %s, %s, %.4f per hour", l.NodeGroup, l.InstanceType, l.Zone, l.CapacityType, l.PricePerHour)
		if len(l.Pods) > 0 {
			fmt.Fprintf(&b, ", for %s", summarize(l.Pods))
		}
		b.WriteString("\n")
	}
	for _, m := range e.Evict {
		to := m.To
		if to == "" {
			to = "a node of another group"
		}
		fmt.Fprintf(&b, "Evict:    %s -> %s\n", m.Pod, to)
	}
	if len(e.NodeGroups) > 0 {
		b.WriteString("Node groups:\n")
		for _, g := range e.NodeGroups {
			fmt.Fprintf(&b, "  %s: %s\n", g.NodeGroup, g.Reason)
		}
	}
	list(&b, "What you can change", e.Hints)
	list(&b, "Live", e.Live)
	list(&b, "Notes", e.Notes)
	_, err := io.WriteString(w, b.String())
	return err
}

func list(b *strings.Builder, title string, items []string) {
	if len(items) == 0 {
		return
	}
	b.WriteString(title + ":\n")
	for _, it := range items {
		b.WriteString("  - " + it + "\n")
	}
}

// summarize shortens a long list of pods.
func summarize(pods []string) string {
	const show = 4
	if len(pods) <= show {
		return strings.Join(pods, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(pods[:show], ", "), len(pods)-show)
}
