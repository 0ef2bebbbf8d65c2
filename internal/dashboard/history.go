package dashboard

import "time"

// Window is how far back the charts reach.
const Window = time.Hour

// History keeps the samples of the last Window in a ring whose size is
// fixed when it is made, so memory does not grow with the time the
// dashboard runs. It is not safe for concurrent use; Server guards it.
type History struct {
	ring  []Sample
	next  int
	count int
}

// NewHistory keeps enough samples for Window at one sample per interval
// (at least 2, at most 3600).
func NewHistory(interval time.Duration) *History {
	n := 2
	if interval > 0 {
		n = max(n, min(3600, int(Window/interval)+1))
	}
	return &History{ring: make([]Sample, n)}
}

// Add records a sample, overwriting the oldest when the ring is full.
func (h *History) Add(s Sample) {
	h.ring[h.next] = s
	h.next = (h.next + 1) % len(h.ring)
	h.count = min(h.count+1, len(h.ring))
}

// Samples returns the samples within Window of the newest, oldest first.
func (h *History) Samples() []Sample {
	out := make([]Sample, 0, h.count)
	start := (h.next - h.count + len(h.ring)) % len(h.ring)
	for i := 0; i < h.count; i++ {
		out = append(out, h.ring[(start+i)%len(h.ring)])
	}
	if len(out) == 0 {
		return out
	}
	newest := out[len(out)-1].Time
	for len(out) > 0 && newest.Sub(out[0].Time) > Window {
		out = out[1:]
	}
	return out
}
