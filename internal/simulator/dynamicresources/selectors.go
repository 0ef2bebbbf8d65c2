package dynamicresources

import (
	"fmt"

	resourcev1 "k8s.io/api/resource/v1"

	"github.com/berth-dev/berth/internal/quantity"
)

// hugeNumber returns an error naming the first CEL selector, of the
// claims or of the device classes they ask for, that holds a number with
// an exponent of more than quantity.MaxExponentDigits digits: CEL's
// quantity() does not return on some of them and compareTo writes out the
// digits of the others. Anyone who can create a claim can write one; such
// claims are not evaluated (the error says why), and nothing else waits.
func (m *Model[N, O]) hugeNumber(claims []*resourcev1.ResourceClaim) error {
	check := func(what string, sels []resourcev1.DeviceSelector) error {
		for _, s := range sels {
			if s.CEL == nil {
				continue
			}
			if h := quantity.HugeExponent([]byte(s.CEL.Expression)); h != "" {
				return fmt.Errorf("%s: a selector holds the number %s, with an exponent of more than %d digits; berth does not evaluate it",
					what, h, quantity.MaxExponentDigits)
			}
		}
		return nil
	}
	request := func(claim *resourcev1.ResourceClaim, class string, sels []resourcev1.DeviceSelector) error {
		if err := check(fmt.Sprintf("claim %s/%s", claim.Namespace, claim.Name), sels); err != nil {
			return err
		}
		if c := m.classes[class]; c != nil {
			return check("device class "+c.Name, c.Spec.Selectors)
		}
		return nil
	}
	for _, c := range claims {
		for _, r := range c.Spec.Devices.Requests {
			if r.Exactly != nil {
				if err := request(c, r.Exactly.DeviceClassName, r.Exactly.Selectors); err != nil {
					return err
				}
			}
			for _, sub := range r.FirstAvailable {
				if err := request(c, sub.DeviceClassName, sub.Selectors); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
