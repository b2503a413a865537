package daemon

import "testing"

func TestUnitFromCgroup(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"cgroup2", "0::/system.slice/flexiq-scaled.service\n", "flexiq-scaled.service"},
		{"hybrid", "12:cpu:/\n1:name=systemd:/system.slice/flexiq-scaled.service\n0::/system.slice/flexiq-scaled.service\n", "flexiq-scaled.service"},
		{"v1 only", "3:cpuacct:/x\n1:name=systemd:/system.slice/foo.service\n", "foo.service"},
		{"a session, not a service", "0::/user.slice/user-0.slice/session-1.scope\n", ""},
		{"root", "0::/\n", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := unitFromCgroup(tc.in); got != tc.want {
				t.Errorf("unitFromCgroup = %q, want %q", got, tc.want)
			}
		})
	}
}
