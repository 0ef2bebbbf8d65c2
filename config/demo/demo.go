// Package demo embeds the objects `make run` (berth dev demo) installs.
package demo

import "embed"

// Files holds the demo manifests.
//
//go:embed *.yaml
var Files embed.FS
