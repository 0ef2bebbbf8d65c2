// Package quantity keeps the quantities of objects users write (pods,
// nodes, annotations, `berth plan` input, DRA selectors) where
// apimachinery's arithmetic stays cheap.
//
// resource.Quantity keeps a decimal exponent as it was written. The API
// server stores a pod that asks for "1e30000000" cpu (its own validation
// takes seconds), and every Cmp or Add of such a quantity with an ordinary
// one then writes out thirty million digits. ParseQuantity does not return
// at all on an exponent beyond int32 ("1e2147483648"), which a custom
// resource's schema admits unless it says otherwise and an annotation or a
// file can carry. So berth bounds quantities where they enter: Parse
// refuses long exponents before apimachinery sees them, Bound replaces a
// quantity of more than 1,000 digits by the number kube-scheduler reads
// from it, and HugeExponent finds such numbers in text (JSON, CEL
// expressions).
package quantity

import (
	"bytes"
	"fmt"
	"math/big"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// MaxExponentDigits is the longest decimal exponent berth reads: 1e999 is
// beyond any resource and still cheap to compare.
const MaxExponentDigits = 3

// maxLen bounds a quantity string Parse reads; the longest honest one
// ("9223372036854775807m", "0.000000001Ei") is far shorter.
const maxLen = 64

// maxDigits is how many integer digits a value in base units (millicores
// for cpu, one for the rest) may have before Bound replaces it: comparing
// or adding a thousand digits takes microseconds, and below it berth reads
// every quantity exactly as kube-scheduler does, sums included.
const maxDigits = 1000

// HugeExponent returns the first number in b whose decimal exponent has
// more than MaxExponentDigits digits (leading zeros do not count), or ""
// when there is none. A number counts when it stands alone as a JSON or
// CEL value: a whole string (between quotes) or a bare number (between
// the start or end, spaces, and JSON's or CEL's punctuation), so that a
// UID ("123e4567-e89b-..."), an image tag or digest or an identifier does
// not. It scans b once (a regular expression took 10 s on 97 MiB of
// pods).
func HugeExponent(b []byte) string {
	for i := 0; i < len(b); i++ {
		e := bytes.IndexAny(b[i:], "eE")
		if e < 0 {
			return ""
		}
		i += e
		end, n := exponentAt(b, i)
		if n <= MaxExponentDigits {
			continue
		}
		// The mantissa: digits with at most one dot, standing alone.
		start, digits, dot := i, 0, false
		for start > 0 {
			c := b[start-1]
			if isDigit(c) {
				digits++
			} else if c != '.' || dot {
				break
			} else {
				dot = true
			}
			start--
		}
		if start > 0 && (b[start-1] == '+' || b[start-1] == '-') {
			start--
		}
		if digits == 0 || !standsAlone(b, start, end) {
			continue
		}
		return string(b[start:end])
	}
	return ""
}

// exponentAt reads the exponent whose e or E is b[i]: a sign, leading
// zeros, then its digits. It returns where the exponent ends and how many
// digits it has, leading zeros aside.
func exponentAt(b []byte, i int) (end, digits int) {
	j := i + 1
	if j < len(b) && (b[j] == '+' || b[j] == '-') {
		j++
	}
	for j < len(b) && b[j] == '0' {
		j++
	}
	end = j
	for end < len(b) && isDigit(b[end]) {
		end++
	}
	return end, end - j
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// standsAlone reports whether b[start:end] is a whole quoted string (the
// same quote on both sides) or a bare value (no quote on either side, and
// an edge or the text's start or end on each).
func standsAlone(b []byte, start, end int) bool {
	before, after := byte(' '), byte(' ')
	if start > 0 {
		before = b[start-1]
	}
	if end < len(b) {
		after = b[end]
	}
	if isQuote(before) || isQuote(after) {
		return before == after
	}
	return isEdge(before) && isEdge(after)
}

func isQuote(c byte) bool { return c == '"' || c == '\'' }

// isEdge reports whether c may stand next to a bare JSON or CEL value: a
// space or punctuation that separates values.
func isEdge(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', ':', ',', '[', ']', '{', '}', '(', ')':
		return true
	}
	return false
}

// Parse parses s as resource.ParseQuantity does, but first refuses, with
// an error, a string longer than 64 bytes or with a decimal exponent of
// more than MaxExponentDigits digits: what it returns is cheap to compare
// and add.
func Parse(s string) (resource.Quantity, error) {
	if len(s) > maxLen {
		return resource.Quantity{}, fmt.Errorf("quantity %.20q... is longer than %d characters", s, maxLen)
	}
	if LongExponent(s) {
		return resource.Quantity{}, fmt.Errorf("quantity %q has an exponent of more than %d digits", s, MaxExponentDigits)
	}
	return resource.ParseQuantity(s)
}

// LongExponent reports whether s, read as one quantity, has a decimal
// exponent of more than MaxExponentDigits digits (leading zeros do not
// count), whether or not digits come before it. HugeExponent, which scans
// text, needs them to tell a number from a word; a quantity does not:
// apimachinery reads "e999999999" as zero with that exponent, and reading
// its millicores then takes a step per unit of the exponent (seconds).
// The only e or E of a quantity apimachinery reads starts its exponent
// (or is the exa suffix, followed by no digit).
func LongExponent(s string) bool {
	i := strings.IndexAny(s, "eE")
	if i < 0 {
		return false
	}
	_, n := exponentAt([]byte(s), i)
	return n > MaxExponentDigits
}

// InRange reports whether q, counted in name's unit (millicores for cpu,
// one for the rest), has at most 1,000 integer digits: comparing or adding
// it then takes microseconds. O(1) in q's exponent: it
// reads q's digits and exponent, never writes them out.
func InRange(name corev1.ResourceName, q resource.Quantity) bool {
	d := q.AsDec() // q is a copy; AsDec only reads a decimal q already holds
	exp := int64(-d.Scale()) + digits(d.UnscaledBig())
	if name == corev1.ResourceCPU {
		exp += 3
	}
	return exp <= maxDigits
}

// digits is the number of decimal digits of |u| (0 has one); beyond int64
// it may count one more (from the bit length, so O(1)).
func digits(u *big.Int) int64 {
	if !u.IsInt64() {
		return int64(u.BitLen())*30103/100000 + 1
	}
	v := u.Int64()
	m := uint64(v)
	if v < 0 {
		m = uint64(-(v + 1)) + 1
	}
	n := int64(1)
	for ; m >= 10; m /= 10 {
		n++
	}
	return n
}

// Bound returns q when it is InRange, else the number kube-scheduler reads
// from it (MilliValue for cpu, Value for the rest, which wrap or clamp on
// their own) as a quantity that is cheap to compare and add. berth's
// simulator reads the same number from q alone; only a sum holding such a
// quantity (of more than 1,000 digits) can read otherwise.
func Bound(name corev1.ResourceName, q resource.Quantity) resource.Quantity {
	if InRange(name, q) {
		return q
	}
	if q.Sign() == 0 {
		return resource.Quantity{Format: q.Format}
	}
	if name == corev1.ResourceCPU {
		return *resource.NewMilliQuantity(q.MilliValue(), q.Format)
	}
	return *resource.NewQuantity(q.Value(), q.Format)
}

// BoundList bounds every quantity of rl in place and returns how many it
// replaced.
func BoundList(rl corev1.ResourceList) int {
	n := 0
	for name, q := range rl {
		if !InRange(name, q) {
			rl[name] = Bound(name, q)
			n++
		}
	}
	return n
}

// BoundPod bounds, in place, every quantity of a pod the scheduler reads:
// its containers' and init containers' requests and limits, the pod-level
// resources and the overhead. It returns how many it replaced.
func BoundPod(p *corev1.Pod) int { return BoundPodSpec(&p.Spec) }

// BoundPodSpec is BoundPod for a pod spec (of a pod, or of the template of
// a workload or a PodTemplate).
func BoundPodSpec(spec *corev1.PodSpec) int {
	n := BoundList(spec.Overhead)
	if spec.Resources != nil {
		n += BoundList(spec.Resources.Requests) + BoundList(spec.Resources.Limits)
	}
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			n += BoundList(cs[i].Resources.Requests) + BoundList(cs[i].Resources.Limits)
		}
	}
	return n
}

// BoundNode bounds a node's capacity and allocatable in place and returns
// how many quantities it replaced.
func BoundNode(n *corev1.Node) int {
	return BoundList(n.Status.Capacity) + BoundList(n.Status.Allocatable)
}

// BoundSlice bounds the capacities of a ResourceSlice's devices and its
// counters in place (DRA selectors compare capacities, the allocator adds
// counters) and returns how many it replaced.
func BoundSlice(s *resourcev1.ResourceSlice) int {
	n := 0
	for i := range s.Spec.Devices {
		d := &s.Spec.Devices[i]
		for name, c := range d.Capacity {
			if !InRange("", c.Value) {
				c.Value = Bound("", c.Value)
				d.Capacity[name] = c
				n++
			}
		}
		for j := range d.ConsumesCounters {
			n += boundCounters(d.ConsumesCounters[j].Counters)
		}
	}
	for i := range s.Spec.SharedCounters {
		n += boundCounters(s.Spec.SharedCounters[i].Counters)
	}
	return n
}

func boundCounters(cs map[string]resourcev1.Counter) int {
	n := 0
	for name, c := range cs {
		if !InRange("", c.Value) {
			c.Value = Bound("", c.Value)
			cs[name] = c
			n++
		}
	}
	return n
}

// BoundObject bounds, in place, the quantities berth reads of an object
// read from the API server: a pod's, a node's, a ResourceSlice's, and the
// pod template's of a PodTemplate or a workload (Deployment, StatefulSet,
// ReplicaSet, DaemonSet, Job), whose requests CapacityBuffers and
// DaemonSet overhead read, and a LimitRange's defaults, maxima and minima
// and a RuntimeClass's overhead, which DaemonSet overhead reads for a
// DaemonSet without a pod. Other objects are left as they are. It returns
// how many quantities it replaced.
func BoundObject(obj any) int {
	switch o := obj.(type) {
	case *corev1.Pod:
		return BoundPod(o)
	case *corev1.Node:
		return BoundNode(o)
	case *resourcev1.ResourceSlice:
		return BoundSlice(o)
	case *corev1.PodTemplate:
		return BoundPodSpec(&o.Template.Spec)
	case *appsv1.Deployment:
		return BoundPodSpec(&o.Spec.Template.Spec)
	case *appsv1.StatefulSet:
		return BoundPodSpec(&o.Spec.Template.Spec)
	case *appsv1.ReplicaSet:
		return BoundPodSpec(&o.Spec.Template.Spec)
	case *appsv1.DaemonSet:
		return BoundPodSpec(&o.Spec.Template.Spec)
	case *batchv1.Job:
		return BoundPodSpec(&o.Spec.Template.Spec)
	case *nodev1.RuntimeClass:
		if o.Overhead != nil {
			return BoundList(o.Overhead.PodFixed)
		}
	case *corev1.LimitRange:
		n := 0
		for i := range o.Spec.Limits {
			it := &o.Spec.Limits[i]
			n += BoundList(it.Default) + BoundList(it.DefaultRequest) + BoundList(it.Max) + BoundList(it.Min)
		}
		return n
	}
	return 0
}
