package podutil

import (
	"time"

	eventsv1 "k8s.io/api/events/v1"
)

// EventTime is when an event (or the last of its series) was observed:
// the latest of its eventTime, its series' lastObservedTime and the
// deprecated lastTimestamp (events written through the core/v1 API carry
// only that one).
func EventTime(e *eventsv1.Event) time.Time {
	at := e.EventTime.Time
	if e.Series != nil && e.Series.LastObservedTime.After(at) {
		at = e.Series.LastObservedTime.Time
	}
	if e.DeprecatedLastTimestamp.After(at) {
		at = e.DeprecatedLastTimestamp.Time
	}
	return at
}
