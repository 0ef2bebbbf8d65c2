package podutil_test

import (
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/api/v1alpha1"
	"github.com/berth-dev/berth/internal/podutil"
	b "github.com/berth-dev/berth/internal/testing/builders"
)

// TestCompanionRequestsRefusesNumbersApimachineryCannotParse: anyone who
// can edit a pod can write the annotation; apimachinery's parser does not
// return on "1e2147483648", and "1e30000000" makes every comparison write
// out its digits. Both are refused with an error naming the number, and
// an ordinary annotation still reads.
func TestCompanionRequestsRefusesNumbersApimachineryCannotParse(t *testing.T) {
	for _, raw := range []string{`{"cpu":"1e2147483648"}`, `{"cpu":"500m","memory":"1e30000000"}`, `{"cpu":922E372036854775807}`} {
		pod := b.Pod("w", b.Annotation(v1alpha1.AnnotationCompanionRequests, raw))
		done := make(chan error, 1)
		go func() {
			_, _, err := podutil.CompanionRequests(pod)
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "exponent of more than 3 digits") {
				t.Errorf("annotation %s: error %v, want one about the exponent", raw, err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("CompanionRequests did not return on annotation %s", raw)
		}
	}
	pod := b.Pod("w", b.Annotation(v1alpha1.AnnotationCompanionRequests, `{"cpu":"5e-1","memory":"64Mi"}`))
	req, found, err := podutil.CompanionRequests(pod)
	if err != nil || !found || req.Cpu().MilliValue() != 500 || req.Memory().Value() != 64<<20 {
		t.Errorf("CompanionRequests = %v, %v, %v; want 500m cpu and 64Mi", req, found, err)
	}
}
