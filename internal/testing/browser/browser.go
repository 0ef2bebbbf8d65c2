// Package browser finds the headless browser the browser tests drive.
package browser

import (
	"os"
	"os/exec"
	"testing"
)

// Chromium finds Debian's Chromium (or another Chrome). Without it the
// test skips, except in CI (CI set), which installs it (`make chromium`):
// there a missing browser is a failure. A browser test is not a unit test:
// with -short (`make race`, which CI runs before it installs Chromium) it
// skips whatever is installed, and `make test` runs it.
func Chromium(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("a browser test: skipped with -short; make test runs it")
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	msg := "no chromium on PATH: install it with `make chromium` (apt-get install -y chromium) to run the browser test"
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}
