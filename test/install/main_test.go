// Package install installs berth's Helm chart on the real local control
// plane with the pinned Helm, as a user would: every object must be
// accepted by the API server, the controller must do its job with exactly
// the chart's ServiceAccount and RBAC, and `helm uninstall` must leave
// nothing of the chart behind but its CRDs.
package install

import (
	"testing"

	"github.com/berth-dev/berth/internal/testing/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }
