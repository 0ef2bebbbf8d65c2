// Package system embeds the cluster objects berth needs besides its CRDs
// and RBAC: its PriorityClasses. The local control plane (berth dev up)
// installs them; the controller only reads them.
package system

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"

	schedulingv1 "k8s.io/api/scheduling/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

//go:embed priorityclasses.yaml
var priorityClasses []byte

// PriorityClasses returns berth's PriorityClasses.
func PriorityClasses() ([]*schedulingv1.PriorityClass, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(priorityClasses), 4096)
	var out []*schedulingv1.PriorityClass
	for {
		pc := &schedulingv1.PriorityClass{}
		if err := dec.Decode(pc); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("decoding priorityclasses.yaml: %w", err)
		}
		out = append(out, pc)
	}
}
