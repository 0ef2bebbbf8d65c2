package output

import (
	"bytes"
	"io"
	"testing"

	"github.com/spf13/pflag"
)

func TestFormats(t *testing.T) {
	v := map[string]int{"nodes": 3}
	for _, tc := range []struct {
		format Format
		want   string
	}{
		{JSON, "{\n  \"nodes\": 3\n}\n"},
		{YAML, "nodes: 3\n"},
		{Table, "NODES 3\n"},
	} {
		var b bytes.Buffer
		if err := tc.format.Write(&b, v, func(w io.Writer) { _, _ = io.WriteString(w, "NODES 3\n") }); err != nil {
			t.Fatal(err)
		}
		if b.String() != tc.want {
			t.Errorf("%s: got %q, want %q", tc.format, b.String(), tc.want)
		}
	}
}

func TestAnUnknownFormatIsRefused(t *testing.T) {
	var f Format
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	f.Bind(fs)
	if f != Table {
		t.Fatalf("default %q, want table", f)
	}
	if err := fs.Parse([]string{"-o", "wide"}); err != nil {
		t.Fatal(err)
	}
	if err := f.Check(); err == nil {
		t.Error("-o wide was accepted")
	}
	if err := f.Write(io.Discard, 1, func(io.Writer) {}); err == nil {
		t.Error("Write accepted -o wide")
	}
}
