package explain

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

var full = Explanation{
	Kind: "Node", Name: "small-a", Decision: DecisionKeep, Reason: "NotReplicated",
	Message:   "node small-a stays: pod default/bare is not backed by a controller",
	NodeGroup: "small", Node: "small-a", Pod: "default/bare",
	Launch:     []Launch{{NodeGroup: "small", InstanceType: "standard-2", Zone: "zone-a", CapacityType: "on-demand", PricePerHour: 0.1, Pods: []string{"default/web"}}},
	Evict:      []Move{{Pod: "default/web", To: "small-b"}, {Pod: "default/api"}},
	NodeGroups: []GroupVerdict{{NodeGroup: "gpu", Reason: "untolerated taint gpu=true:NoSchedule"}},
	Hints:      []string{"annotate it"}, Live: []string{"taint x"}, Notes: []string{"memory"},
}

// TestJSONFieldsAreTheDocumentedOnes: scripts read these names; renaming
// one breaks them.
func TestJSONFieldsAreTheDocumentedOnes(t *testing.T) {
	var out bytes.Buffer
	if err := writeJSON(&out, full); err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(out.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	want := []string{"decision", "evict", "hints", "kind", "launch", "live", "message", "name", "node", "nodeGroup", "nodeGroups", "notes", "pod", "reason"}
	if diff := cmp.Diff(want, keys); diff != "" {
		t.Errorf("JSON fields (-want +got):\n%s", diff)
	}
	var back Explanation
	if err := json.Unmarshal(out.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(full, back); diff != "" {
		t.Errorf("JSON round trip (-want +got):\n%s", diff)
	}
}

func TestYAMLSaysTheSameAsJSON(t *testing.T) {
	var out bytes.Buffer
	if err := writeYAML(&out, full); err != nil {
		t.Fatal(err)
	}
	var back Explanation
	if err := yaml.Unmarshal(out.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(full, back); diff != "" {
		t.Errorf("YAML round trip (-want +got):\n%s", diff)
	}
}

func TestTextPutsTheDecisionAndRuleFirst(t *testing.T) {
	var out bytes.Buffer
	if err := writeText(&out, full); err != nil {
		t.Fatal(err)
	}
	want := `Node small-a
Decision: Keep (NotReplicated)
Why:      node small-a stays: pod default/bare is not backed by a controller
Launch:   small standard-2 in zone-a, on-demand, 0.1000 per hour, for default/web
Evict:    default/web -> small-b
Evict:    default/api -> a node of another group
Node groups:
  gpu: untolerated taint gpu=true:NoSchedule
What you can change:
  - annotate it
Live:
  - taint x
Notes:
  - memory
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
