package daemon

import (
	"os"
	"testing"

	ctlsock "github.com/flexiq/flexiq-scaled/internal/control"
)

func TestWakeCgroupPool(t *testing.T) {
	for _, tc := range []struct {
		cg, pool string
		ok       bool
	}{
		{"/flexiq.slice/flexiq-web.slice/flexiq-web-wake.service", "web", true},
		{"/flexiq.slice/flexiq-api_v2.slice/flexiq-api_v2-wake.service", "api_v2", true},
		// Another pool's slice, or a look-alike a user's own service
		// manager could make under its delegated subtree.
		{"/flexiq.slice/flexiq-api.slice/flexiq-web-wake.service", "", false},
		{"/user.slice/user-1000.slice/user@1000.service/flexiq.slice/flexiq-web.slice/flexiq-web-wake.service", "", false},
		{"/flexiq.slice/flexiq-web.slice/flexiq-web@1.service", "", false},
		{"/flexiq.slice/flexiq-web.slice/flexiq--wake.service", "", false},
		{"", "", false},
	} {
		pool, ok := wakeCgroupPool(tc.cg)
		if pool != tc.pool || ok != tc.ok {
			t.Errorf("wakeCgroupPool(%q) = %q, %v; want %q, %v", tc.cg, pool, ok, tc.pool, tc.ok)
		}
	}
}

// TestWakeOfOnlyDynamicUsers: a peer outside systemd's dynamic range is
// never the wake process, whatever its cgroup: this test's own process is
// judged by its uid alone.
func TestWakeOfOnlyDynamicUsers(t *testing.T) {
	self := ctlsock.Peer{PID: int32(os.Getpid()), UID: uint32(os.Getuid())}
	if self.UID >= dynamicUIDMin && self.UID <= dynamicUIDMax {
		t.Skip("running as a dynamic user")
	}
	if pool, ok := wakeOf(self); ok {
		t.Fatalf("uid %d taken for the wake process of %q", self.UID, pool)
	}
	// In the range, a process outside a wake service's cgroup is not it.
	self.UID = dynamicUIDMin
	if pool, ok := wakeOf(self); ok {
		t.Fatalf("a process in %s taken for the wake process of %q", cgroupOf(self.PID), pool)
	}
}
