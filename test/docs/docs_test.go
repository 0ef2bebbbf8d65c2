package docs

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/berth-dev/berth/internal/cli"
	"github.com/berth-dev/berth/internal/devenv"
)

// pages reads README.md, the chart's README and every page under docs/.
func pages(t *testing.T) (string, map[string]Page) {
	t.Helper()
	root, err := devenv.FindRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]Page{}
	add := func(rel string) {
		data, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		out[rel] = Parse(string(data))
	}
	add("README.md")
	add("charts/berth/README.md")
	err = filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".md" {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err == nil {
			add(rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 15 {
		t.Fatalf("read only %d pages", len(out))
	}
	return root, out
}

func TestEveryRelativeLinkResolves(t *testing.T) {
	root, all := pages(t)
	links := 0
	for _, path := range slices.Sorted(maps.Keys(all)) {
		links += len(all[path].Links)
		for _, p := range CheckLinks(root, path, all[path], all) {
			t.Error(p)
		}
	}
	t.Logf("%d pages, %d links", len(all), links)
}

func TestEveryBerthCommandAndFlagShownExists(t *testing.T) {
	_, all := pages(t)
	root := cli.NewRoot()
	checked := 0
	for _, path := range slices.Sorted(maps.Keys(all)) {
		for _, line := range all[path].Code {
			for _, args := range Invocations(line) {
				checked++
				for _, p := range CheckCommand(root, args) {
					t.Errorf("%s: `%s`: %s", path, strings.TrimSpace(line), p)
				}
			}
		}
	}
	if checked < 50 {
		t.Errorf("only %d berth commands found in the docs: is the parser still finding them?", checked)
	}
	t.Logf("%d berth commands checked", checked)
}

// TestTheChecksCatchWhatTheyAreFor feeds the checks a page with a broken
// link, a missing heading, a link out of the repository, an unknown
// subcommand and an unknown flag, and expects each to be reported.
func TestTheChecksCatchWhatTheyAreFor(t *testing.T) {
	root, all := pages(t)
	page := Parse("# T\n\nSee [a](missing.md), [b](getting-started.md#no-such-heading), [c](../../outside.md),\n" +
		"[d](getting-started.md#as-a-kubectl-plugin) and [e](#t).\n\n```sh\nbin/berth tenant creat x\nberth plan -f x.yaml --nope\n" +
		"kubectl berth explain pod default/web -o json\n```\n")
	got := CheckLinks(root, "docs/x.md", page, all)
	for _, line := range page.Code {
		for _, args := range Invocations(line) {
			got = append(got, CheckCommand(cli.NewRoot(), args)...)
		}
	}
	want := []string{"missing.md does not exist", "has no heading #no-such-heading", "leaves the repository",
		`"berth tenant" has no subcommand "creat"`, `"berth plan" has no flag --nope`}
	if len(got) != len(want) {
		t.Errorf("got %d problems, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for _, w := range want {
		if !slices.ContainsFunc(got, func(g string) bool { return strings.Contains(g, w) }) {
			t.Errorf("no problem says %q:\n%s", w, strings.Join(got, "\n"))
		}
	}
}

func TestAnchorsAreGitHubs(t *testing.T) {
	for heading, want := range map[string]string{
		"Offline planning: `berth plan`":                "offline-planning-berth-plan",
		"Plan quality: compared with the exact optimum": "plan-quality-compared-with-the-exact-optimum",
		"Why is my pod pending?":                        "why-is-my-pod-pending",
		"berth dev interrupt":                           "berth-dev-interrupt",
	} {
		if got := Anchor(heading); got != want {
			t.Errorf("Anchor(%q) = %q, want %q", heading, got, want)
		}
	}
}
