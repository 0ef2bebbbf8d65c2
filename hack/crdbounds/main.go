// Command crdbounds bounds the quantities of berth's CRDs after
// controller-gen wrote them. controller-gen gives every resource.Quantity
// the pattern apimachinery publishes, which admits any exponent; the API
// server then stores "1e2147483648", on which apimachinery's parser in
// berth's informers does not return, and "1e30000000", every comparison
// with which writes out its digits. crdbounds narrows the exponent to
// quantity.MaxExponentDigits digits, so that kubectl apply gets the error.
// (A quantity written as a JSON number the API server already refuses
// beyond int64.)
package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"github.com/berth-dev/berth/internal/quantity"
)

// upstream is the quantity pattern controller-gen writes.
const upstream = `^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$`

var bounded = fmt.Sprintf(`^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?[0-9]{1,%d}))?$`, quantity.MaxExponentDigits)

// patternLine is a YAML line holding the upstream pattern; group 1 is its
// indentation.
var patternLine = regexp.MustCompile(`(?m)^( *)pattern: ` + regexp.QuoteMeta(upstream) + `$`)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: crdbounds DIR")
		os.Exit(2)
	}
	files, err := filepath.Glob(filepath.Join(os.Args[1], "*.yaml"))
	if err != nil || len(files) == 0 {
		fmt.Fprintf(os.Stderr, "crdbounds: no CRDs in %s (%v)\n", os.Args[1], err)
		os.Exit(1)
	}
	for _, f := range files {
		if err := rewrite(f); err != nil {
			fmt.Fprintf(os.Stderr, "crdbounds: %v\n", err)
			os.Exit(1)
		}
	}
}

func rewrite(path string) error {
	in, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out := patternLine.ReplaceAllFunc(in, func(line []byte) []byte {
		return []byte(string(patternLine.FindSubmatch(line)[1]) + "pattern: " + bounded)
	})
	if bytes.Equal(in, out) {
		return nil
	}
	return os.WriteFile(path, out, 0o644) //nolint:gosec // a generated file in the repository, as controller-gen writes it
}
