package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// CheckLinks returns a problem for each relative link of the page at path
// (relative to root) whose file or heading does not exist, or that leads
// out of the repository. pages are the parsed pages by path, for anchors.
func CheckLinks(root, path string, page Page, pages map[string]Page) []string {
	var problems []string
	for _, link := range page.Links {
		if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
			continue
		}
		target, anchor, _ := strings.Cut(link, "#")
		file := path
		if target != "" {
			file = filepath.Clean(filepath.Join(filepath.Dir(path), target))
		}
		if file == ".." || strings.HasPrefix(file, "../") || filepath.IsAbs(target) {
			problems = append(problems, fmt.Sprintf("%s: link %q leaves the repository", path, link))
			continue
		}
		if file == path {
			if anchor != "" && !page.Anchors[anchor] {
				problems = append(problems, fmt.Sprintf("%s: link %q: no heading #%s", path, link, anchor))
			}
			continue
		}
		if _, err := os.Stat(filepath.Join(root, file)); err != nil {
			problems = append(problems, fmt.Sprintf("%s: link %q: %s does not exist", path, link, file))
			continue
		}
		if anchor == "" || !strings.HasSuffix(file, ".md") {
			continue
		}
		target2, ok := pages[file]
		if !ok {
			data, err := os.ReadFile(filepath.Join(root, file))
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: link %q: %v", path, link, err))
				continue
			}
			target2 = Parse(string(data))
		}
		if !target2.Anchors[anchor] {
			problems = append(problems, fmt.Sprintf("%s: link %q: %s has no heading #%s", path, link, file, anchor))
		}
	}
	return problems
}
