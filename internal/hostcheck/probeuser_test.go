package hostcheck

import (
	"slices"
	"strings"
	"testing"

	"github.com/flexiq/flexiq-scaled/internal/config"
)

// readiness.user is checked against NSS as the pool's user is, and a
// probe that runs as root while the workers do not is warned about.
func TestProbeUserChecks(t *testing.T) {
	const rk = "pools.email.service.readiness.user"
	nobody := "user = \"nobody\""
	for _, tc := range []struct {
		name         string
		text         string
		nss          fakeNSS
		wantAsked    []string
		wantProblems []string // keys
		wantWarnings []string // keys, of checkUsers and Warnings
		wantMsg      string   // in the first problem or warning of rk
	}{
		{name: "the pool's user, looked up once", text: commandProbe(nobody, ""),
			nss: fakeNSS{known: map[string]bool{"passwd:nobody": true}}, wantAsked: []string{"passwd:nobody"}},
		{name: "another user", text: commandProbe(nobody, "user = \"probe\"\n"),
			nss: fakeNSS{known: map[string]bool{"passwd:nobody": true, "passwd:probe": true}}, wantAsked: []string{"passwd:nobody", "passwd:probe"}},
		{name: "a user that does not exist", text: commandProbe(nobody, "user = \"ghost\"\n"),
			nss:       fakeNSS{known: map[string]bool{"passwd:nobody": true}},
			wantAsked: []string{"passwd:nobody", "passwd:ghost"}, wantProblems: []string{rk}, wantMsg: `user "ghost" does not exist on this system`},
		{name: "cannot check is a warning", text: commandProbe(nobody, "user = \"sssduser\"\n"),
			nss:       fakeNSS{known: map[string]bool{"passwd:nobody": true}, fail: map[string]bool{"passwd:sssduser": true}},
			wantAsked: []string{"passwd:nobody", "passwd:sssduser"}, wantWarnings: []string{rk}, wantMsg: "cannot check"},
		{name: "root written out", text: commandProbe(nobody, "user = \"root\"\n"),
			nss: fakeNSS{known: map[string]bool{"passwd:nobody": true}}, wantAsked: []string{"passwd:nobody"},
			wantWarnings: []string{rk}, wantMsg: `the command probe runs as root (uid 0) while the workers run as "nobody"`},
		{name: "uid 0 written out", text: commandProbe(nobody, "user = \"0\"\n"),
			nss: fakeNSS{known: map[string]bool{"passwd:nobody": true}}, wantAsked: []string{"passwd:nobody"},
			wantWarnings: []string{rk}, wantMsg: "runs as root"},
		{name: "root under another name", text: commandProbe(nobody, "user = \"toor\"\n"),
			nss:       fakeNSS{known: map[string]bool{"passwd:nobody": true, "passwd:toor": true}, ids: map[string][2]uint32{"passwd:toor": {0, 0}}},
			wantAsked: []string{"passwd:nobody", "passwd:toor"}, wantWarnings: []string{rk}, wantMsg: `user "toor" is uid 0`},
		{name: "root with root workers: no word of the probe", text: commandProbe("user = \"root\"", "user = \"root\"\n"),
			nss:       fakeNSS{known: map[string]bool{"passwd:root": true}, ids: map[string][2]uint32{"passwd:root": {0, 0}}},
			wantAsked: []string{"passwd:root"}, wantWarnings: []string{"pools.email.user"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := load(t, tc.text)
			if err != nil {
				t.Fatal(err)
			}
			problems, warnings := checkUsers(c, tc.nss.lookup)
			for _, w := range Warnings(c) {
				// "<file>: <key>: <msg>"; those of the users only.
				_, rest, _ := strings.Cut(w, ": ")
				key, msg, _ := strings.Cut(rest, ": ")
				if key == rk || key == "pools.email.user" {
					warnings = append(warnings, config.Problem{File: c.Path, Key: key, Msg: msg})
				}
			}
			if !slices.Equal(tc.nss.asked, tc.wantAsked) {
				t.Errorf("looked up %v, want %v", tc.nss.asked, tc.wantAsked)
			}
			if got := keys(problems); !slices.Equal(got, tc.wantProblems) {
				t.Errorf("problems %v, want keys %v", problems, tc.wantProblems)
			}
			if got := keys(warnings); !slices.Equal(got, tc.wantWarnings) {
				t.Errorf("warnings %v, want keys %v", warnings, tc.wantWarnings)
			}
			for _, pr := range append(problems, warnings...) {
				if pr.Key == rk {
					if pr.File != c.Path || !strings.Contains(pr.Msg, tc.wantMsg) {
						t.Errorf("%s: %q in %s, want %q in %s", rk, pr.Msg, pr.File, tc.wantMsg, c.Path)
					}
					break
				}
			}
		})
	}
}
