package controller

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/source"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// A command probe runs with the runner for the pool's probe user
// (config.Pool.ProbeAccount), never with the daemon's own unless the probe
// is to run as the daemon (issue 27: every probe ran as root).
func TestCommandProbeRunsAsProbeUser(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		user, group, probeUser string
		noRunAs                bool
		wantAs                 string // "user:group" asked of ProbeCommands; "" = the daemon's runner
		wantErr                string // the probe's
	}{
		{name: "the pool's user", user: "nobody", probeUser: "nobody", wantAs: "nobody:"},
		{name: "the pool's user and group", user: "app", group: "staff", probeUser: "app", wantAs: "app:staff"},
		{name: "another user", user: "app", group: "staff", probeUser: "probe", wantAs: "probe:"},
		{name: "root written out", user: "app", probeUser: "root"},
		{name: "a user manager's", user: "", probeUser: ""},
		{name: "no runner for the user", user: "nobody", probeUser: "nobody", noRunAs: true, wantErr: `no runner can run the command probe as user "nobody"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sr := newServiceRig(t, config.ReadyCommand, 0)
			sr.cfg.User, sr.cfg.Group, sr.cfg.Service.Readiness.User = tc.user, tc.group, tc.probeUser
			var asked []string
			as := &fakeRunner{file: sr.runner.file}
			tweak := sr.tweak
			sr.tweak = func(o *Options) {
				tweak(o)
				if !tc.noRunAs {
					o.ProbeCommands = func(user, group string) source.CommandRunner {
						asked = append(asked, user+":"+group)
						return as
					}
				}
			}
			sr.pool = sr.newPool()
			sr.src.set(20, 0, nil)
			sr.start(sr.pool)
			sr.tick(time.Second)
			tg, ok := sr.prober.target(units.UnitName("web", 1))
			if tc.wantErr != "" {
				if ok {
					t.Fatal("probed without a runner for its user")
				}
				if !strings.Contains(sr.log.String(), tc.wantErr) {
					t.Errorf("the journal does not say why the replica is not probed:\n%s", sr.log.String())
				}
				return
			}
			if !ok {
				t.Fatalf("not probed:\n%s", sr.log.String())
			}
			// The probe's command; the daemon's runner also runs the
			// template's after-change command, now and then.
			probes := func(f *fakeRunner) int {
				f.mu.Lock()
				defer f.mu.Unlock()
				return len(slices.DeleteFunc(slices.Clone(f.calls), func(argv []string) bool { return argv[0] != "/bin/true" }))
			}
			if err := tg.Check(context.Background()); err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.wantAs == "" && (len(asked) != 0 || probes(sr.runner) != 1):
				t.Errorf("asked for %q, ran %d with the daemon's runner; want the daemon's", asked, probes(sr.runner))
			case tc.wantAs != "" && (len(asked) == 0 || slices.ContainsFunc(asked, func(a string) bool { return a != tc.wantAs }) ||
				probes(as) != 1 || probes(sr.runner) != 0):
				// Asked once for each replica tracked.
				t.Errorf("asked for %q, ran %d as it and %d as the daemon; want %s", asked, probes(as), probes(sr.runner), tc.wantAs)
			}
		})
	}
}
