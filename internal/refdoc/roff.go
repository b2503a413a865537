package refdoc

import (
	"regexp"
	"strings"
)

// The Markdown of the KeyDocs is a small subset: paragraphs, "- " and "1. "
// lists, fenced code blocks, pipe tables, and inline code, bold, italics and
// links. roff renders that subset for the man page; anything else would
// show as written, which the committed page makes visible in review.

var (
	reCode   = regexp.MustCompile("`([^`]*)`")
	reBold   = regexp.MustCompile(`\*\*([^*]+)\*\*`)
	reItalic = regexp.MustCompile(`\*([^*\s][^*]*)\*`)
	reLink   = regexp.MustCompile("\\[((?:`[^`]*`|[^\\]])+)\\]\\(([^)]+)\\)")
	reNumber = regexp.MustCompile(`^\d+\. `)
)

// glyphs maps characters outside ASCII to groff's named glyphs, so that the
// page renders the same whatever the reader's locale.
var glyphs = strings.NewReplacer(
	"—", `\(em`, "–", `\(en`, "×", `\(mu`, "→", `\(->`, "≥", `\(>=`, "≤", `\(<=`,
	"±", `\(+-`, "…", "...", "λ", `\(*l`,
	"−", `\-`, "’", "'", "“", `\(lq`, "”", `\(rq`, "·", `\(pc`, "µ", `\(mc`, "≈", `\(~~`,
)

// reSuper is a run of superscript digits: 10¹⁶ is written 10^16, as
// groff has no glyph for most of them.
var reSuper = regexp.MustCompile(`[⁰¹²³⁴⁵⁶⁷⁸⁹]+`)

var superDigits = strings.NewReplacer("⁰", "0", "¹", "1", "²", "2", "³", "3", "⁴", "4", "⁵", "5", "⁶", "6", "⁷", "7", "⁸", "8", "⁹", "9")

// escape makes plain text safe for roff.
func escape(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = reSuper.ReplaceAllStringFunc(s, func(m string) string { return `\(ha` + superDigits.Replace(m) })
	return glyphs.Replace(s)
}

// inline renders one line of Markdown text as roff text. Links go first,
// as their text may be code (a source type's name).
func inline(s string) string {
	s = reLink.ReplaceAllStringFunc(s, func(m string) string {
		sub := reLink.FindStringSubmatch(m)
		if strings.HasPrefix(sub[2], "http") {
			return sub[1] + " (" + sub[2] + ")"
		}
		return sub[1]
	})
	var b strings.Builder
	for s != "" {
		loc := reCode.FindStringIndex(s)
		if loc == nil {
			b.WriteString(emphasis(escape(s)))
			break
		}
		b.WriteString(emphasis(escape(s[:loc[0]])))
		code := escape(s[loc[0]+1 : loc[1]-1])
		b.WriteString(`\fB` + strings.ReplaceAll(code, "-", `\-`) + `\fR`)
		s = s[loc[1]:]
	}
	return b.String()
}

func emphasis(s string) string {
	s = reBold.ReplaceAllString(s, `\fB$1\fR`)
	return reItalic.ReplaceAllString(s, `\fI$1\fR`)
}

// line guards a line of roff text against being read as a request.
func line(s string) string {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		return `\&` + s
	}
	return s
}

// roffBlocks renders Markdown paragraphs, lists, code blocks and tables.
func roffBlocks(md string) string {
	var b strings.Builder
	lines := strings.Split(md, "\n")
	para := false // inside running text, which a blank line ends
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		t := strings.TrimSpace(l)
		switch {
		case t == "":
			para = false
		case strings.HasPrefix(t, "```"):
			b.WriteString(".PP\n.RS\n.EX\n")
			for i++; i < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[i]), "```"); i++ {
				b.WriteString(line(strings.ReplaceAll(escape(lines[i]), "-", `\-`)) + "\n")
			}
			b.WriteString(".EE\n.RE\n")
			para = false
		case strings.HasPrefix(t, "|"):
			i = roffTable(&b, lines, i) - 1
			para = false
		case strings.HasPrefix(t, "#"):
			// A page's title heads a subsection; its sections are
			// bold lines, as man has no third level.
			hashes, text, _ := strings.Cut(t, " ")
			if len(hashes) == 1 {
				b.WriteString(".SS " + quoteHeading(strings.ReplaceAll(text, "`", "")) + "\n")
			} else {
				b.WriteString(".PP\n" + line(`\fB`+inline(strings.ReplaceAll(text, "`", ""))+`\fR`) + "\n")
			}
			para = false
		case strings.HasPrefix(t, "- "):
			b.WriteString(".IP \\(bu 2\n" + line(inline(t[2:])) + "\n")
			para = true
		case reNumber.MatchString(t):
			n, rest, _ := strings.Cut(t, " ")
			b.WriteString(".IP " + n + " 3\n" + line(inline(rest)) + "\n")
			para = true
		default:
			if !para && l == strings.TrimLeft(l, " ") {
				b.WriteString(".PP\n")
			}
			b.WriteString(line(inline(t)) + "\n")
			para = true
		}
	}
	return b.String()
}

// roffTable renders a pipe table from lines[i] as tagged paragraphs, one per
// row: the first cell as the tag, the others after it. It returns the index
// of the first line after the table.
func roffTable(b *strings.Builder, lines []string, i int) int {
	var header []string
	for ; i < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[i]), "|"); i++ {
		cells := splitRow(lines[i])
		if header == nil {
			header = cells
			continue
		}
		if strings.Trim(strings.Join(cells, ""), "-: ") == "" {
			continue
		}
		b.WriteString(".TP\n" + line(inline(cells[0])) + "\n")
		var rest []string
		for j, c := range cells[1:] {
			if c == "" {
				continue
			}
			if j+1 < len(header) && len(cells) > 2 && j+2 < len(cells) {
				c = header[j+1] + ": " + c
			}
			rest = append(rest, inline(c))
		}
		b.WriteString(line(strings.Join(rest, "; ")) + "\n")
	}
	b.WriteString(".PP\n")
	return i
}

func splitRow(row string) []string {
	row = strings.TrimSpace(row)
	row = strings.TrimSuffix(strings.TrimPrefix(row, "|"), "|")
	var cells []string
	var cur strings.Builder
	inCode := false
	for _, r := range row {
		switch {
		case r == '`':
			inCode = !inCode
		case r == '|' && !inCode:
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
			continue
		}
		cur.WriteRune(r)
	}
	return append(cells, strings.TrimSpace(cur.String()))
}
