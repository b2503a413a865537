package config

import (
	"strings"

	"github.com/flexiq/flexiq-scaled/internal/api"
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

// printable is api.Printable: one line, whatever the file held.
func printable(s string) string { return api.Printable(s) }

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
