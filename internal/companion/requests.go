package companion

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/podutil"
)

// Requests reads the companion requests on a workload: see
// podutil.CompanionRequests, the one reader of the annotation.
func Requests(pod *corev1.Pod) (req corev1.ResourceList, found bool, err error) {
	return podutil.CompanionRequests(pod)
}
