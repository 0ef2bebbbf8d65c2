package fidelity

import (
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/berth-dev/berth/api/v1alpha1"
)

// dump writes case c as a `berth plan` input (one YAML document per
// object) to path, to study a refused placement:
//
//	FIDELITY_DUMP=/tmp go test -run TestPlansHold . -args -cases 300
//	berth plan -f /tmp/plan-seed-283.yaml
func dump(path string, c PlanCase) error {
	var docs []string
	add := func(apiVersion, kind string, o runtime.Object) {
		raw, err := yaml.Marshal(o)
		if err != nil {
			return
		}
		docs = append(docs, "apiVersion: "+apiVersion+"\nkind: "+kind+"\n"+string(raw))
	}
	for _, ng := range c.Groups {
		ng := ng.DeepCopy()
		ng.Spec.Provider.KWOK = &v1alpha1.KWOKProvider{}
		add(v1alpha1.GroupVersion.String(), "NodeGroup", ng)
	}
	for _, ds := range c.DaemonSets {
		add("apps/v1", "DaemonSet", ds)
	}
	for _, n := range c.Nodes {
		add("v1", "Node", n)
	}
	for _, p := range append(append([]*corev1.Pod(nil), c.Bound...), c.Pending...) {
		add("v1", "Pod", p)
	}
	return os.WriteFile(path, []byte(strings.Join(docs, "---\n")), 0o600)
}
