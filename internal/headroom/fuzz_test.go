package headroom_test

import (
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/headroom"
)

// FuzzScheduleActive: any cron text, window and time gives an answer or an
// error, never a panic or a hang (the cron library searches at most five
// years ahead).
func FuzzScheduleActive(f *testing.F) {
	for _, c := range []string{"0 9 * * 1-5", "0 0 30 2 *", "*/5 * * * *", "@hourly", "TZ=Europe/Paris 0 9 * * *", "0 0 29 2 *", "CRON_TZ=", "TZ="} {
		f.Add(c, int64(time.Hour), int64(1795000000))
	}
	f.Fuzz(func(t *testing.T, expr string, d, unix int64) {
		_, _ = headroom.ScheduleActive(expr, time.Duration(d), time.Unix(unix%(1<<40), 0))
	})
}
