package cli

import (
	"bytes"
	"strings"
	"testing"
)

func TestHelpNamesTheCommandAsTheUserTypedIt(t *testing.T) {
	for _, tc := range []struct{ argv0, want string }{
		{"/usr/local/bin/berth", "berth tenant list"},
		{"bin/berth", "berth tenant list"},
		{"/home/me/go/bin/kubectl-berth", "kubectl berth tenant list"},
	} {
		t.Run(tc.argv0, func(t *testing.T) {
			root := NewRoot()
			AsInvoked(root, tc.argv0)
			var out bytes.Buffer
			root.SetOut(&out)
			root.SetArgs([]string{"tenant", "list", "--help"})
			if err := root.Execute(); err != nil {
				t.Fatal(err)
			}
			usage := out.String()[strings.Index(out.String(), "Usage:"):]
			if !strings.Contains(usage, "  "+tc.want+" ") || (tc.want == "berth tenant list" && strings.Contains(usage, "kubectl")) {
				t.Errorf("usage does not say %q:\n%s", tc.want, usage)
			}
		})
	}
}
