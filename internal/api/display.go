package api

// What the operator's commands print of text that came from outside the
// daemon's own code: host ids and errors read from the fleet's store, a
// source's errors, units' names. Any of it may carry control characters
// (an escape sequence that retitles the terminal or rewrites the screen),
// so it goes through these before it reaches a terminal.

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Printable escapes control characters, format characters (bidi
// overrides, zero-width ones) and invalid UTF-8 as Go would quote them
// (\n, \x1b, \u202e, \xff), leaving everything else as it is.
func Printable(s string) string {
	bad := func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == utf8.RuneError }
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
		case bad(r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// ShortHostID is a host id (a machine id, 32 hex digits) as people read
// it: its first 12 characters. An id with anything but letters, digits,
// '.', '_' and '-' (any writer of the fleet's store can write one) is
// quoted whole instead, control characters escaped, so that it can
// neither reach the terminal raw nor pass for a well-formed id.
func ShortHostID(id string) string {
	if strings.IndexFunc(id, func(r rune) bool { return !isIDRune(r) }) >= 0 {
		return strconv.Quote(id)
	}
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func isIDRune(r rune) bool {
	return r < utf8.RuneSelf && (r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '.' || r == '_' || r == '-')
}
