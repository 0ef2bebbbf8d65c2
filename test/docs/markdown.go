// Package docs keeps berth's documentation honest: every relative link in
// README.md and docs/ resolves (file and heading), no link leaves the
// repository, and every berth command and flag the pages show exists in
// the CLI. Its sub-package tour runs the README's tour against a real
// control plane.
package docs

import (
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// Page is a Markdown file split into what the checks look at.
type Page struct {
	// Links are the targets of [text](target) links outside code.
	Links []string
	// Anchors are the GitHub anchors of the page's headings.
	Anchors map[string]bool
	// Code are the command lines of shell code blocks (every line of a sh,
	// bash or shell block; the "$ " lines of a console block or one without
	// a language) and the inline code spans.
	Code []string
}

var (
	linkRE   = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	inlineRE = regexp.MustCompile("`([^`]+)`")
	fenceRE  = regexp.MustCompile("^\\s*(```|~~~)")
)

// Parse splits a Markdown page.
func Parse(text string) Page {
	p := Page{Anchors: map[string]bool{}}
	seen := map[string]int{}
	var prose strings.Builder
	inFence, lang := false, ""
	for _, line := range strings.Split(text, "\n") {
		if fenceRE.MatchString(line) {
			inFence = !inFence
			lang = ""
			if f := strings.Fields(strings.TrimLeft(strings.TrimSpace(line), "`~")); len(f) > 0 {
				lang = f[0]
			}
			continue
		}
		if inFence {
			switch prompt, ok := strings.CutPrefix(strings.TrimSpace(line), "$ "); {
			case lang == "sh" || lang == "bash" || lang == "shell":
				p.Code = append(p.Code, line)
			case (lang == "console" || lang == "") && ok:
				p.Code = append(p.Code, prompt)
			}
			continue
		}
		if h := strings.TrimLeft(line, "#"); len(h) < len(line) && strings.HasPrefix(h, " ") && len(line)-len(h) <= 6 {
			a := Anchor(h)
			if n := seen[a]; n > 0 {
				p.Anchors[a+"-"+strconv.Itoa(n)] = true
			} else {
				p.Anchors[a] = true
			}
			seen[a]++
		}
		prose.WriteString(line)
		prose.WriteString("\n")
	}
	for _, m := range inlineRE.FindAllStringSubmatch(prose.String(), -1) {
		p.Code = append(p.Code, strings.Join(strings.Fields(m[1]), " "))
	}
	for _, m := range linkRE.FindAllStringSubmatch(inlineRE.ReplaceAllString(prose.String(), "``"), -1) {
		p.Links = append(p.Links, m[1])
	}
	return p
}

// Anchor is the anchor GitHub gives a heading: lower case, punctuation
// dropped (but - and _), spaces as hyphens.
func Anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
