// Package controlplane only exists so that this module has a package; the
// binaries are declared with tool directives in go.mod.
package controlplane
