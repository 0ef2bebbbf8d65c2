// Package scheme builds the runtime.Scheme berth's clients use: the
// Kubernetes built-in types plus berth's own API.
package scheme

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	capacitybufferv1beta1 "github.com/berth-dev/berth/api/capacitybuffer/v1beta1"
	"github.com/berth-dev/berth/api/v1alpha1"
)

// New returns a scheme with the built-in Kubernetes types and berth's types.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(v1alpha1.AddToScheme(s))
	utilruntime.Must(capacitybufferv1beta1.AddToScheme(s))
	return s
}
