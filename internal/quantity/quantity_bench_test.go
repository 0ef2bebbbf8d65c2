package quantity

import (
	"strings"
	"testing"
)

// BenchmarkHugeExponent scans pods as `berth plan` reads them (JSON, with
// an image digest that holds "1e4567"): go test -bench HugeExponent
// ./internal/quantity/ reports the throughput.
func BenchmarkHugeExponent(b *testing.B) {
	doc := []byte(strings.Repeat(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-7d9f8c6b5-x2k4j","namespace":"default",`+
		`"labels":{"app":"web"}},"spec":{"containers":[{"name":"c","image":"registry/app@sha256:1e45670abcdef",`+
		`"resources":{"requests":{"cpu":"500m","memory":"1Gi"}}}]}},`, 10000))
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		if h := HugeExponent(doc); h != "" {
			b.Fatalf("found %q", h)
		}
	}
}
