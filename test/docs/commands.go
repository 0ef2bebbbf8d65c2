package docs

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// invocationRE finds berth run as a command: at the start of a shell
// command (line start, a prompt, after a pipe, ;, && or $( ), as berth,
// bin/berth, ./bin/berth, kubectl-berth or `kubectl berth`.
var invocationRE = regexp.MustCompile(`(?:^|[|;&(]\s*|^\$\s+|\$\(\s*)(?:\./)?(?:bin/)?(?:berth|kubectl-berth|kubectl berth)(?:\s+|$)`)

// separators end a command on a line (a $( starts another one).
var separators = regexp.MustCompile(`\s*(?:\||;|&&|\)|\$\(|#|>|<).*$`)

// Invocations returns the argument lists of the berth commands on a line.
func Invocations(line string) [][]string {
	var out [][]string
	for _, loc := range invocationRE.FindAllStringIndex(line, -1) {
		rest := separators.ReplaceAllString(line[loc[1]:], "")
		var args []string
		for _, f := range strings.Fields(rest) {
			f = strings.Trim(f, "[]")
			if f == "" || f == "..." {
				continue
			}
			args = append(args, f)
		}
		out = append(out, args)
	}
	return out
}

// CheckCommand returns what in args the CLI does not know: a subcommand
// or a flag. Positional arguments (NODE, default/web, <node>) are not
// judged.
func CheckCommand(root *cobra.Command, args []string) []string {
	cmd, rest, err := root.Find(args)
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") && cmd.HasAvailableSubCommands() && !cmd.Runnable() {
		problems = append(problems, fmt.Sprintf("%q has no subcommand %q", cmd.CommandPath(), rest[0]))
	}
	for _, a := range rest {
		if !strings.HasPrefix(a, "-") || a == "-" || a == "--" {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		var f *pflag.Flag
		if strings.HasPrefix(a, "--") {
			f = cmd.Flags().Lookup(name)
			if f == nil {
				f = cmd.InheritedFlags().Lookup(name)
			}
		} else if len(name) == 1 {
			f = cmd.Flags().ShorthandLookup(name)
			if f == nil {
				f = cmd.InheritedFlags().ShorthandLookup(name)
			}
		}
		if f == nil && name != "help" && name != "h" {
			problems = append(problems, fmt.Sprintf("%q has no flag %s", cmd.CommandPath(), a))
		}
	}
	return problems
}
