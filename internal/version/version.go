// Package version reports the berth build. Version is set at link time:
// -ldflags "-X github.com/berth-dev/berth/internal/version.Version=v0.1.0".
package version

import "runtime/debug"

// Version is the release of this build; "dev" for local builds.
var Version = "dev"

// String returns the version and, when the build recorded it, the commit.
func String() string {
	s := Version
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, kv := range info.Settings {
			if kv.Key == "vcs.revision" && len(kv.Value) >= 12 {
				s += " (" + kv.Value[:12] + ")"
			}
		}
		s += " " + info.GoVersion
	}
	return s
}
