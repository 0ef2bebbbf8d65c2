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
// quantity no int64 holds by the number kube-scheduler reads from it, and
// HugeExponent finds such numbers in text (JSON, CEL expressions).
package quantity

import (
	"bytes"
	"fmt"
	"math/big"

	corev1 "k8s.io/api/core/v1"
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
// for cpu, one for the rest, as kube-scheduler counts) may have: int64
// holds every number of 18 digits and some of 19, and arithmetic on 19
// digits is as cheap as on one.
const maxDigits = 19

// HugeExponent returns the first number in b whose decimal exponent has
// more than MaxExponentDigits digits (leading zeros do not count), or ""
// when there is none. A number counts when it stands alone: neither
// preceded nor followed by a letter, digit, dot or underscore, so that an
// image digest or an identifier does not. It scans b once (a regular
// expression took 10 s on a 100 MiB `berth plan` file).
func HugeExponent(b []byte) string {
	for i := 0; i < len(b); i++ {
		e := bytes.IndexAny(b[i:], "eE")
		if e < 0 {
			return ""
		}
		i += e
		// The exponent: a sign, leading zeros, then its digits.
		j := i + 1
		if j < len(b) && (b[j] == '+' || b[j] == '-') {
			j++
		}
		for j < len(b) && b[j] == '0' {
			j++
		}
		end := j
		for end < len(b) && isDigit(b[end]) {
			end++
		}
		if end-j <= MaxExponentDigits || (end < len(b) && isWord(b[end])) {
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
		if digits == 0 || (start > 0 && isWord(b[start-1])) {
			continue
		}
		if start > 0 && (b[start-1] == '+' || b[start-1] == '-') {
			start--
		}
		return string(b[start:end])
	}
	return ""
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isWord(c byte) bool {
	return isDigit(c) || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '.'
}

// Parse parses s as resource.ParseQuantity does, but first refuses, with
// an error, a string longer than 64 bytes or with a decimal exponent of
// more than MaxExponentDigits digits: what it returns is cheap to compare
// and add.
func Parse(s string) (resource.Quantity, error) {
	if len(s) > maxLen {
		return resource.Quantity{}, fmt.Errorf("quantity %.20q... is longer than %d characters", s, maxLen)
	}
	if h := HugeExponent([]byte(s)); h != "" {
		return resource.Quantity{}, fmt.Errorf("quantity %q has an exponent of more than %d digits", s, MaxExponentDigits)
	}
	return resource.ParseQuantity(s)
}

// InRange reports whether q, counted in name's unit (millicores for cpu,
// one for the rest), has at most 19 integer digits: comparing or adding it
// then costs what it costs for any quantity. O(1) in q's exponent: it
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
// simulator reads the same numbers, so bounding changes no plan.
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
func BoundPod(p *corev1.Pod) int {
	n := BoundList(p.Spec.Overhead)
	if p.Spec.Resources != nil {
		n += BoundList(p.Spec.Resources.Requests) + BoundList(p.Spec.Resources.Limits)
	}
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
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

// BoundSlice bounds the capacities of a ResourceSlice's devices in place
// (DRA selectors compare them) and returns how many it replaced.
func BoundSlice(s *resourcev1.ResourceSlice) int {
	n := 0
	for i := range s.Spec.Devices {
		for name, c := range s.Spec.Devices[i].Capacity {
			if !InRange("", c.Value) {
				c.Value = Bound("", c.Value)
				s.Spec.Devices[i].Capacity[name] = c
				n++
			}
		}
	}
	return n
}
