package api

import "testing"

func TestShortHostID(t *testing.T) {
	for _, tc := range []struct{ id, want string }{
		{"8a1d0c93e27f4b5a9d2e", "8a1d0c93e27f"},
		{"web-1.example_2", "web-1.exampl"},
		{"short", "short"},
		{"", ""},
		{"\x1b]0;pwned\a", `"\x1b]0;pwned\a"`},
		{"host with space", `"host with space"`},
		{"hôte", `"hôte"`},
		{"ab\u202ecd", `"ab\u202ecd"`},
	} {
		if got := ShortHostID(tc.id); got != tc.want {
			t.Errorf("ShortHostID(%q) = %s, want %s", tc.id, got, tc.want)
		}
	}
}

func TestPrintable(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain text, é", "plain text, é"},
		{"a\nb\x00c\td", `a\nb\x00c\td`},
		{"\x1b]0;pwned\a", `\x1b]0;pwned\a`},
		{"\x9b2J", `\x9b2J`}, // C1: CSI on 8-bit terminals
		{"ab\u202ecd", `ab\u202ecd`},
		{"bad \xff utf8", `bad \xff utf8`},
	} {
		if got := Printable(tc.in); got != tc.want {
			t.Errorf("Printable(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
