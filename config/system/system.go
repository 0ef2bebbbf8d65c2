// Package system embeds the cluster objects berth needs besides its CRDs
// and RBAC: its PriorityClasses, which the local control plane (berth dev
// up) installs and the controller only reads, and its namespace with the
// Pod Security labels the Helm chart gives it.
package system

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

//go:embed priorityclasses.yaml
var priorityClasses []byte

//go:embed namespace.yaml
var namespace []byte

// Namespace returns berth's namespace, berth-system, with its Pod Security
// labels.
func Namespace() (*corev1.Namespace, error) {
	ns := &corev1.Namespace{}
	if err := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(namespace), 4096).Decode(ns); err != nil {
		return nil, fmt.Errorf("decoding namespace.yaml: %w", err)
	}
	return ns, nil
}

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
