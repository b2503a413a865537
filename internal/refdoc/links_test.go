package refdoc

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	reMDLink  = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)\)`)
	reHeading = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
	reFence   = regexp.MustCompile("(?ms)^```.*?^```")
)

// slug is GitHub's anchor for a heading: lower case, punctuation but "-"
// and "_" dropped, spaces as "-".
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func anchors(text string) map[string]bool {
	out := map[string]bool{}
	for _, m := range reHeading.FindAllStringSubmatch(reFence.ReplaceAllString(text, ""), -1) {
		out[slug(m[1])] = true
	}
	return out
}

// The README is a landing page that links the reference's pages: every
// relative link of README.md and docs/ must lead to a file, and to a
// heading of it when it names one, so that a section moved or renamed
// cannot leave a link behind.
func TestDocsLinks(t *testing.T) {
	root := filepath.Join("..", "..")
	pages := []string{"README.md"}
	for _, glob := range []string{"docs/*.md", "docs/sources/*.md"} {
		m, err := filepath.Glob(filepath.Join(root, glob))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range m {
			rel, _ := filepath.Rel(root, p)
			pages = append(pages, rel)
		}
	}
	for _, page := range pages {
		text, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		body := reFence.ReplaceAllString(string(text), "")
		for _, m := range reMDLink.FindAllStringSubmatch(body, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := filepath.Join(filepath.Dir(page), file)
			if file == "" {
				path = page
			}
			dest, err := os.ReadFile(filepath.Join(root, path))
			if err != nil {
				t.Errorf("%s: link %s: no file %s", page, target, path)
				continue
			}
			if anchor != "" && strings.HasSuffix(path, ".md") && !anchors(string(dest))[anchor] {
				t.Errorf("%s: link %s: %s has no heading #%s", page, target, path, anchor)
			}
		}
	}
}
