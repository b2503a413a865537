package units_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/units"
	"github.com/flexiq/flexiq-scaled/test/sandbox"
)

// Administrators tune workers with ordinary drop-ins: one for the template
// reaches every transient instance, one for the pool slice caps the pool.
func TestDropIns(t *testing.T) {
	t.Parallel()
	sb := sandbox.Get(t)
	ctx := testContext(t, 30*time.Second)
	m := newManager(t, sb)

	const pool = "dropin"
	svcDir := "/etc/systemd/system/" + "flexiq-" + pool + "@.service.d"
	sliceDir := "/etc/systemd/system/" + units.SliceName(pool) + ".d"
	script := fmt.Sprintf(`mkdir -p %[1]s %[2]s &&
printf '[Service]\nEnvironment=DROPIN=yes\n' > %[1]s/10-test.conf &&
printf '[Slice]\nCPUQuota=150%%%%\n' > %[2]s/10-test.conf &&
systemctl daemon-reload`, svcDir, sliceDir)
	if _, err := sb.Exec(ctx, "sh", "-c", script); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = sb.Exec(ctx, "sh", "-c", fmt.Sprintf("rm -rf %s %s && systemctl daemon-reload", svcDir, sliceDir))
	})

	unit := start(t, ctx, m, sb, sleeper(pool, 1))
	env := show(t, ctx, sb, unit, "Environment")["Environment"]
	for _, want := range []string{"DROPIN=yes", "FLEXIQ_SCALED_POOL=dropin", "FLEXIQ_SCALED_SLOT=1"} {
		if !strings.Contains(" "+env+" ", " "+want+" ") {
			t.Errorf("Environment = %q, want it to include %s", env, want)
		}
	}
	if out, err := sb.Exec(ctx, "sh", "-c", "tr '\\0' '\\n' < /proc/$(systemctl show -P MainPID "+unit+")/environ"); err != nil || !strings.Contains(out, "DROPIN=yes\n") {
		t.Errorf("the worker's environment lacks DROPIN=yes: %q, %v", out, err)
	}

	slice := show(t, ctx, sb, units.SliceName(pool), "CPUQuotaPerSecUSec", "DropInPaths")
	if slice["CPUQuotaPerSecUSec"] != "1.500000s" && slice["CPUQuotaPerSecUSec"] != "1.5s" {
		t.Errorf("slice CPUQuotaPerSecUSec = %q, want 1.5s (DropInPaths %q)", slice["CPUQuotaPerSecUSec"], slice["DropInPaths"])
	}
	// And the kernel enforces it on the slice's cgroup, where the cpu
	// controller is there to do so: on a hybrid host every controller is
	// bound to cgroup v1, and the sandbox's cgroup2 tree has none.
	cg := fmt.Sprintf("/proc/%d/root/sys/fs/cgroup", sb.PID)
	controllers, err := os.ReadFile(cg + "/cgroup.controllers")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(strings.Fields(string(controllers)), "cpu") {
		t.Logf("no cpu controller in the sandbox's cgroup2 tree (%q): cpu.max not checked", strings.TrimSpace(string(controllers)))
		return
	}
	cpuMax := cg + "/flexiq.slice/" + units.SliceName(pool) + "/cpu.max"
	if b, err := os.ReadFile(cpuMax); err != nil || strings.TrimSpace(string(b)) != "150000 100000" {
		t.Errorf("%s = %q, %v; want 150000 100000", cpuMax, b, err)
	}
}
