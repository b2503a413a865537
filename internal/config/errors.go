package config

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Problem is one thing wrong with a configuration file.
type Problem struct {
	File string
	Key  string // dotted TOML key, e.g. "pools.email.max_workers"; empty for syntax errors
	Msg  string
}

// String formats the problem as "<file>: <key>: <msg>", leaving out the key
// when the problem is not tied to one. It is always one printable line:
// messages quote parts of the file (the TOML decoder's among them), which
// could otherwise carry a newline that forges another problem, or a NUL
// that the journal would cut the message at.
func (p Problem) String() string {
	if p.Key == "" {
		return printable(p.File + ": " + p.Msg)
	}
	return printable(p.File + ": " + p.Key + ": " + p.Msg)
}

// printable escapes control characters and invalid UTF-8 as Go would quote
// them (\n, \x00), leaving everything else as it is.
func printable(s string) string {
	bad := func(r rune) bool { return unicode.IsControl(r) || r == utf8.RuneError }
	if strings.IndexFunc(s, bad) < 0 {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError:
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				b.WriteString(`\x` + strconv.FormatUint(uint64(s[i])|0x100, 16)[1:])
				continue
			}
			b.WriteRune(r)
		case unicode.IsControl(r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Error is every problem found in a configuration file. Load reports them all
// at once so that fixing a file takes one round, not one per mistake.
type Error struct {
	Problems []Problem
}

// Error lists the problems one per line.
func (e *Error) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}
