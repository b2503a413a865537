package config

import (
	"slices"
	"strings"
	"testing"
)

// commandProbe is a pool with user lines (extra) whose readiness is a
// command probe, with readiness lines (probe).
func commandProbe(extra, probe string) string {
	return pool(extra) + "[pools.email.service.readiness]\ntype = \"command\"\ncommand = [\"/usr/bin/check\"]\n" + probe
}

// Issue 27: a command probe runs as the pool's user and group unless
// readiness.user says otherwise; root only when written out.
func TestProbeUser(t *testing.T) {
	for _, tc := range []struct {
		name, text          string
		user                string // Readiness.User
		unitUser, unitGroup string // ProbeAccount
	}{
		{"the default pool user", commandProbe("", ""), DefaultUser, DefaultUser, ""},
		{"the pool's user and group", commandProbe("user = \"nobody\"\ngroup = \"nogroup\"", ""), "nobody", "nobody", "nogroup"},
		{"another user, its primary group", commandProbe("user = \"nobody\"\ngroup = \"nogroup\"", "user = \"probe\"\n"), "probe", "probe", ""},
		{"the pool's user written out", commandProbe("user = \"nobody\"\ngroup = \"nogroup\"", "user = \"nobody\"\n"), "nobody", "nobody", "nogroup"},
		{"root: as the daemon", commandProbe("user = \"nobody\"", "user = \"root\"\n"), "root", "", ""},
		{"uid 0: as the daemon", commandProbe("user = \"nobody\"", "user = \"0\"\n"), "0", "", ""},
		{"a numeric uid", commandProbe("user = \"nobody\"", "user = \"4711\"\n"), "4711", "4711", ""},
		{"root workers", commandProbe("user = \"root\"\ngroup = \"staff\"", ""), "root", "root", "staff"},
		{"an HTTP probe runs in the daemon", svc(webPorts + "[pools.email.service.readiness]\ntype = \"http\"\nport = \"http\"\n"), "", "", ""},
		{"no service", pool("user = \"nobody\""), "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := load(t, tc.text)
			if err != nil {
				t.Fatal(err)
			}
			p := c.Pools["email"]
			if p.Service != nil && p.Service.Readiness.User != tc.user {
				t.Errorf("readiness user %q, want %q", p.Service.Readiness.User, tc.user)
			}
			if u, g := p.ProbeAccount(); u != tc.unitUser || g != tc.unitGroup {
				t.Errorf("ProbeAccount() = %q, %q; want %q, %q", u, g, tc.unitUser, tc.unitGroup)
			}
		})
	}
}

// Under a user manager, a probe that would have run as the default user
// runs as the daemon's own, as the workers do; a user written out stays,
// for systemd to refuse loudly.
func TestProbeUserForUserManager(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       string
	}{
		{"default", commandProbe("", ""), ""},
		{"the default user written in the readiness", commandProbe("", "user = \"flexiq\"\n"), ""},
		{"pool user written", commandProbe("user = \"app\"", ""), "app"},
		{"probe user written", commandProbe("", "user = \"probe\"\n"), "probe"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := load(t, tc.text)
			if err != nil {
				t.Fatal(err)
			}
			c.ForUserManager()
			if u, _ := c.Pools["email"].ProbeAccount(); u != tc.want {
				t.Errorf("ProbeAccount() user %q, want %q", u, tc.want)
			}
		})
	}
}

func TestProbeUserErrors(t *testing.T) {
	const rk = "pools.email.service.readiness.user"
	for _, tc := range []struct {
		name, text, msg string
	}{
		{"empty", commandProbe("", "user = \"\"\n"), "must not be empty"},
		{"a colon", commandProbe("", "user = \"a:b\"\n"), `"a:b" is not a valid user or group name`},
		{"a slash", commandProbe("", "user = \"../x\"\n"), "must not contain"},
		{"white space", commandProbe("", "user = \" app\"\n"), "must not start or end with white space"},
		{"not a string", commandProbe("", "user = 65534\n"), "must be a string"},
		{"another probe type", svc(webPorts + "[pools.email.service.readiness]\ntype = \"tcp\"\nport = \"http\"\nuser = \"nobody\"\n"), `does not apply to type = "tcp"`},
		{"no probe", svc("[pools.email.service.readiness]\nuser = \"nobody\"\n"), `does not apply to type = "active"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeConfig(t, tc.text)
			_, err := Load(path)
			if err == nil {
				t.Fatal("loaded")
			}
			want := path + ": " + rk + ": "
			for _, p := range problems(t, err) {
				if s := p.String(); strings.HasPrefix(s, want) && strings.Contains(s, tc.msg) {
					return
				}
			}
			t.Errorf("no problem %q…%q in:\n%v", want, tc.msg, err)
		})
	}
}

// The effective configuration writes who the probe runs as, and a reload
// that changes it names the key.
func TestProbeUserEffectiveAndDiff(t *testing.T) {
	c, err := load(t, commandProbe("user = \"nobody\"", ""))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := WriteEffective(&b, c); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "[pools.email.service.readiness]") || !strings.Contains(b.String(), "user = \"nobody\"\n") ||
		strings.Count(b.String(), "user = \"nobody\"") != 2 {
		t.Errorf("the effective config does not say the probe runs as nobody:\n%s", b.String())
	}
	d, err := load(t, commandProbe("user = \"nobody\"", "user = \"root\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := Diff(c.Pools["email"], d.Pools["email"]); !slices.Equal(got, []string{"service.readiness.user"}) {
		t.Errorf("Diff = %q, want [service.readiness.user]", got)
	}
}
