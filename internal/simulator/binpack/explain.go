package binpack

import (
	"github.com/berth-dev/berth/internal/simulator/predicates"
	"github.com/berth-dev/berth/internal/simulator/snapshot"
)

// TemplateVerdict is why a pod does or does not fit one template.
type TemplateVerdict struct {
	Template *Template
	Status   predicates.Status
}

// Explain evaluates a pod against every template, for messages about pods
// that could not be placed. It does not change the snapshot.
func Explain(in Input, c *snapshot.Class) []TemplateVerdict {
	p := newPacker(in, nil)
	in.Snapshot.Prepare(c)
	out := make([]TemplateVerdict, 0, len(in.Templates))
	for _, t := range in.Templates {
		_, st := p.fit(c, t)
		out = append(out, TemplateVerdict{Template: t, Status: st})
	}
	return out
}
