// Package refdoc renders the configuration reference, docs/configuration.md
// and the man page flexiq-scaled.toml(5), from the KeyDocs that internal/config
// declares beside its checks: the keys are documented once, where they are
// checked, and `make docs` (go run ./internal/refdoc/gen) writes both files.
// TestCommittedDocsMatch fails when the committed files differ.
package refdoc

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/flexiq/flexiq-scaled/internal/config"
	// The source types register themselves, with their keys' docs, when
	// package source is linked in: without it the reference would have no
	// [pools.NAME.source] part at all.
	_ "github.com/flexiq/flexiq-scaled/internal/source"
)

// The prose around the keys, which no key owns: how the file is read and
// checked, the drop-ins, the example, and the man page's fixed sections.
var (
	//go:embed head.md
	mdHead string
	//go:embed tail.md
	mdTail string
	//go:embed head.5
	manHead string
	//go:embed tail.5
	manTail string
	//go:embed sources.md
	sourceIntro string
)

// sourcePages are the pages of docs/sources, in the order the man page
// takes them in: the man page is installed where docs/ is not, so it
// carries what they say of each queue system. The order is that of the
// overview, README.md, and of its first links to its sibling pages (a
// family's page, then its types'); a page it does not link comes last, by
// name, so that a new type's page is in the man page even before the
// overview names it.
func sourcePages(dir string) ([]string, error) {
	overview, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		return nil, err
	}
	all, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil {
		return nil, err
	}
	exists := map[string]bool{}
	for _, p := range all {
		exists[filepath.Base(p)] = true
	}
	order := []string{"README.md"}
	seen := map[string]bool{"README.md": true}
	for _, m := range reSiblingLink.FindAllStringSubmatch(string(overview), -1) {
		if name := m[1]; exists[name] && !seen[name] {
			order, seen[name] = append(order, name), true
		}
	}
	for _, p := range all { // Glob sorts
		if name := filepath.Base(p); !seen[name] {
			order = append(order, name)
		}
	}
	return order, nil
}

// reSiblingLink is a Markdown link to a page in the same folder.
var reSiblingLink = regexp.MustCompile(`\]\(([^/)#\s]+\.md)(?:#[^)]*)?\)`)

// Files are the generated files, by their paths in the repository whose
// root is root.
func Files(root string) (map[string]string, error) {
	tables, sources := config.Reference(), config.SourceTypeDocs()
	dir := filepath.Join(root, "docs", "sources")
	names, err := sourcePages(dir)
	if err != nil {
		return nil, fmt.Errorf("the man page's source pages: %w", err)
	}
	var pages []string
	for _, name := range names {
		text, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("the man page's source pages: %w", err)
		}
		pages = append(pages, string(text))
	}
	return map[string]string{
		"docs/configuration.md":         Markdown(tables, sources),
		"docs/man/flexiq-scaled.toml.5": Roff(tables, sources, pages),
	}, nil
}

// A heading of the reference: level 2 starts a table (## in Markdown, .SH
// in roff), level 3 a part of one (###, .SS).
type heading struct {
	level int
	text  string // Markdown
}

// A part is one TableDoc with the headings that come before it.
type part struct {
	heads []heading
	t     config.TableDoc
}

// outline orders the reference: the tables, then [pools.NAME.source] with
// a part per source type. A table starts under its Title, or under its
// name when it has none; the further parts of the same table come under
// their Titles.
func outline(tables, sources []config.TableDoc) []part {
	var parts []part
	prev := ""
	for _, t := range tables {
		var hs []heading
		switch {
		case t.Name != prev && t.Title != "":
			hs = []heading{{2, t.Title}}
		case t.Name != prev:
			hs = []heading{{2, "`[" + t.Name + "]`"}}
		case t.Title != "":
			hs = []heading{{3, t.Title}}
		}
		parts = append(parts, part{hs, t})
		prev = t.Name
	}
	for i, t := range sources {
		title := t.Title
		if title == "" {
			title = "`[" + t.Name + "]`"
		}
		hs := []heading{{3, title}}
		if i == 0 {
			hs = append([]heading{{2, "`[pools.NAME.source]`"}}, hs...)
			parts = append(parts, part{heads: hs[:1], t: config.TableDoc{Doc: sourceIntro}})
			hs = hs[1:]
		}
		parts = append(parts, part{hs, t})
	}
	return parts
}

// Markdown renders docs/configuration.md.
func Markdown(tables, sources []config.TableDoc) string {
	var b strings.Builder
	b.WriteString(mdHead)
	for _, p := range outline(tables, sources) {
		for _, h := range p.heads {
			fmt.Fprintf(&b, "\n%s %s\n", strings.Repeat("#", h.level), h.text)
		}
		t := p.t
		if t.Doc != "" {
			b.WriteString("\n" + t.Doc + "\n")
		}
		if len(t.Keys) > 0 {
			b.WriteString("\n| Key | Type | Default | Rule | Meaning |\n|---|---|---|---|---|\n")
			for _, k := range t.Keys {
				fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", k.Name, cell(k.Type), cell(mdDefault(k)), cell(k.Limits), cell(k.Doc))
			}
		}
		if t.Notes != "" {
			b.WriteString("\n" + t.Notes + "\n")
		}
	}
	b.WriteString("\n" + mdTail)
	return b.String()
}

// cell keeps a table cell on its line.
func cell(s string) string { return strings.ReplaceAll(s, "\n", " ") }

func mdDefault(k config.KeyDoc) string {
	switch {
	case k.Default == "" && k.Required:
		return "— (required)"
	case k.Default == "":
		return "—"
	case config.IsLiteral(k.Default):
		return "`" + k.Default + "`"
	}
	return k.Default
}

// Roff renders the man page flexiq-scaled.toml(5): the keys, then the pages
// of docs/sources (Markdown) under QUEUE SOURCES.
func Roff(tables, sources []config.TableDoc, sourcePages []string) string {
	var b strings.Builder
	b.WriteString(manHead)
	for _, p := range outline(tables, sources) {
		for _, h := range p.heads {
			req := ".SH"
			if h.level > 2 {
				req = ".SS"
			}
			fmt.Fprintf(&b, "%s %s\n", req, quoteHeading(strings.ReplaceAll(h.text, "`", "")))
		}
		t := p.t
		b.WriteString(roffBlocks(t.Doc))
		for _, k := range t.Keys {
			fmt.Fprintf(&b, ".TP\n.B %s\n", escape(strings.ReplaceAll(k.Name, "-", `\-`)))
			if s := roffSummary(k); s != "" {
				b.WriteString(line(s) + "\n.br\n")
			}
			if k.Doc != "" {
				b.WriteString(line(inline(cell(k.Doc))) + "\n")
			}
		}
		b.WriteString(roffBlocks(t.Notes))
	}
	b.WriteString(".SH \"QUEUE SOURCES\"\n")
	for _, page := range sourcePages {
		b.WriteString(roffBlocks(page))
	}
	b.WriteString(manTail)
	return b.String()
}

// roffSummary is a key's type, default and limits on one line.
func roffSummary(k config.KeyDoc) string {
	var parts []string
	if k.Type != "" {
		parts = append(parts, inline(k.Type))
	}
	switch {
	case k.Default != "":
		d := k.Default
		if config.IsLiteral(d) {
			d = "`" + d + "`"
		}
		parts = append(parts, "default "+inline(d))
	case k.Required:
		parts = append(parts, "required")
	}
	if k.Limits != "" {
		parts = append(parts, inline(cell(k.Limits)))
	}
	if len(parts) == 0 {
		return ""
	}
	return "(" + strings.Join(parts, "; ") + ")"
}

func quoteHeading(s string) string {
	s = escape(s)
	s = strings.ReplaceAll(s, "-", `\-`)
	s = strings.ReplaceAll(s, `"`, `\(dq`)
	return `"` + s + `"`
}
