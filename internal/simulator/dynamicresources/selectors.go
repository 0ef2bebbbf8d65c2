package dynamicresources

import (
	"fmt"

	celast "github.com/google/cel-go/common/ast"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/berth-dev/berth/internal/quantity"
)

// hugeNumber returns an error naming the first CEL selector, of the
// claims or of the device classes they ask for, that may hand quantity()
// or isQuantity() a number with an exponent of more than
// quantity.MaxExponentDigits digits: apimachinery's parser, which both
// call, does not return on some of them, and compareTo writes out the
// digits of the others. Anyone who can create a claim can write one; such
// claims are not evaluated (the error says why), and nothing else waits.
// The verdict is kept per expression.
func (m *Model[N, O]) hugeNumber(claims []*resourcev1.ResourceClaim) error {
	check := func(what string, sels []resourcev1.DeviceSelector) error {
		for _, s := range sels {
			if s.CEL == nil {
				continue
			}
			if err := m.quantityArgs(s.CEL.Expression); err != nil {
				return fmt.Errorf("%s: %w", what, err)
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

// maxQuantityVerdicts bounds the expressions whose verdict is kept.
const maxQuantityVerdicts = 1000

// quantityArgs checks, in the parsed expression (so that escapes such as
// "1\u00652147483648" are read as CEL reads them), what every call of
// quantity() or isQuantity() is given: a string written in the selector
// must not hold a huge exponent, and a value computed when the selector
// runs (from device attributes, or strings joined) is refused, as its
// digits cannot be known before. An expression that does not compile is
// left to the allocator, which reports why.
func (m *Model[N, O]) quantityArgs(expr string) error {
	if err, ok := m.quantityVerdicts[expr]; ok {
		return err
	}
	var err error
	if c := m.celCache.GetOrCompile(expr); c.Error == nil && c.Environment != nil {
		if ast, iss := c.Environment.Parse(expr); iss.Err() == nil {
			err = quantityCalls(ast.NativeRep().Expr())
		}
	}
	if len(m.quantityVerdicts) >= maxQuantityVerdicts {
		clear(m.quantityVerdicts)
	}
	m.quantityVerdicts[expr] = err
	return err
}

// quantityCalls returns an error for the first call of quantity() or
// isQuantity() in e given anything but a string literal, or a literal
// with a huge exponent.
func quantityCalls(e celast.Expr) error {
	var err error
	celast.PostOrderVisit(e, celast.NewExprVisitor(func(e celast.Expr) {
		if err != nil || e.Kind() != celast.CallKind {
			return
		}
		call := e.AsCall()
		name := call.FunctionName()
		if name != "quantity" && name != "isQuantity" {
			return
		}
		args := call.Args()
		if call.IsMemberFunction() {
			args = append([]celast.Expr{call.Target()}, args...)
		}
		for _, a := range args {
			if a.Kind() != celast.LiteralKind {
				err = fmt.Errorf("a selector calls %s() on a value computed when it runs; berth evaluates %s() only on numbers written in the selector, "+
					"as one with a huge exponent would stall it", name, name)
				return
			}
			s, ok := a.AsLiteral().Value().(string)
			if !ok {
				continue
			}
			// The literal is read as one quantity.
			if quantity.LongExponent(s) {
				err = fmt.Errorf("a selector holds the number %.40s, with an exponent of more than %d digits; berth does not evaluate it",
					s, quantity.MaxExponentDigits)
				return
			}
		}
	}))
	return err
}
