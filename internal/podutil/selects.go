package podutil

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// RequiredTermSelects reports whether a required term of q selects f: its
// pod affinity, anti-affinity and DoNotSchedule topology spreads when q
// is pending (where f is decides where q may go), only its anti-affinity
// when q is bound (f may not go where q is). A term with a namespace
// selector is taken to select every namespace (namespace labels are not
// known here), so that in doubt f counts as selected.
func RequiredTermSelects(q, f *corev1.Pod, pending bool) bool {
	if pending {
		for _, c := range q.Spec.TopologySpreadConstraints {
			if c.WhenUnsatisfiable == corev1.DoNotSchedule && q.Namespace == f.Namespace && selects(c.LabelSelector, f) {
				return true
			}
		}
	}
	a := q.Spec.Affinity
	if a == nil {
		return false
	}
	if a.PodAntiAffinity != nil && termsSelect(q, f, a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) {
		return true
	}
	return pending && RequiredAffinitySelects(q, f)
}

// RequiredAffinitySelects reports whether a required pod affinity term of
// q selects f: q may go only where a pod like f is. Namespace selectors
// are read as in RequiredTermSelects.
func RequiredAffinitySelects(q, f *corev1.Pod) bool {
	a := q.Spec.Affinity
	return a != nil && a.PodAffinity != nil && termsSelect(q, f, a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution)
}

// termsSelect reports whether one of q's pod affinity terms selects f.
func termsSelect(q, f *corev1.Pod, terms []corev1.PodAffinityTerm) bool {
	for i := range terms {
		t := &terms[i]
		inNamespace := t.NamespaceSelector != nil || (len(t.Namespaces) == 0 && q.Namespace == f.Namespace)
		for _, ns := range t.Namespaces {
			inNamespace = inNamespace || ns == f.Namespace
		}
		if inNamespace && selects(t.LabelSelector, f) {
			return true
		}
	}
	return false
}

// selects reports whether a label selector matches f's labels (an empty
// one matches every pod); one that cannot be read selects nothing (the
// API server and the planner refuse its pod anyway).
func selects(ls *metav1.LabelSelector, f *corev1.Pod) bool {
	sel, err := metav1.LabelSelectorAsSelector(ls)
	return err == nil && sel.Matches(labels.Set(f.Labels))
}
