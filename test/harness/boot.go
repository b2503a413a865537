package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/test/sandbox"
)

// Boot boots one sandbox for t, within the time given (the wait for the
// machine's suite lock aside), and stops it when t ends. Options left zero
// are filled in as the suites want them: the checkout bound at its own path
// and the sandbox owned by this process, so that it goes with the test
// binary however that ends.
func Boot(t testing.TB, within time.Duration, opts sandbox.Options) *sandbox.Sandbox {
	t.Helper()
	t0 := time.Now()
	sb := BootAll(t, within, opts)[0]
	t.Logf("sandbox %s booted in %.2fs", sb.Name, time.Since(t0).Seconds())
	return sb
}

// BootAll boots the sandboxes at once (Boot's defaults apply to each), and
// registers one cleanup that stops them all at once: the keepers power off
// side by side. A sandbox that fails to boot fails t, after the others are
// arranged to stop.
func BootAll(t testing.TB, within time.Duration, opts ...sandbox.Options) []*sandbox.Sandbox {
	t.Helper()
	root, err := sandbox.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	sbs := make([]*sandbox.Sandbox, len(opts))
	errs := make([]error, len(opts))
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var wg sync.WaitGroup
	for i, o := range opts {
		if o.Binds == nil {
			o.Binds = []string{root}
		}
		if o.OwnerPID == 0 {
			o.OwnerPID = os.Getpid()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sbs[i], errs[i] = sandbox.Start(ctx, o)
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, sb := range sbs {
			if sb == nil {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				if err := sb.Stop(ctx); err != nil {
					t.Errorf("stopping the sandbox %s: %v", sb.Name, err)
				}
			}()
		}
		wg.Wait()
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("booting the sandbox %s: %v", opts[i].Name, err)
		}
	}
	return sbs
}

// JournalOnFailure logs the end of sb's journal (journalctl args) if t has
// failed by the time it ends: what the daemon saw and decided. Registered
// after Boot, it runs before the sandbox stops.
func JournalOnFailure(t testing.TB, sb *sandbox.Sandbox, args ...string) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("journal of %s at failure:\n%s", sb.Name, Journal(sb, args...))
		}
	})
}

// Daemon is what InstallDaemon puts in a sandbox.
type Daemon struct {
	// BinDir holds flexiq-scaled and the Tools, as Build made them.
	BinDir string
	// Tools are more binaries of BinDir to install: name -> path inside.
	Tools map[string]string
	// DropIn is the body of the [Service] section of the test drop-in:
	// short watchdog and restart delays keep the tests quick (the shipped
	// values are for production).
	DropIn string
}

// InstallDaemon installs the daemon into sb as its package would (the
// binary, the shipped unit, the flexiq user, the configuration directory),
// the tools, and the test drop-in, and reloads systemd. The daemon is not
// started. It may run again in the same sandbox.
func InstallDaemon(t testing.TB, sb *sandbox.Sandbox, d Daemon) {
	t.Helper()
	root, err := sandbox.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	unit, err := os.ReadFile(filepath.Join(root, "systemd", DaemonUnit))
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(d.Tools))
	for name := range d.Tools {
		names = append(names, name)
	}
	sort.Strings(names)
	var script strings.Builder
	script.WriteString("id flexiq >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin flexiq\n")
	fmt.Fprintf(&script, "install -m 0755 %s/flexiq-scaled /usr/bin/flexiq-scaled\n", d.BinDir)
	for _, name := range names {
		fmt.Fprintf(&script, "install -D -m 0755 %s/%s %s\n", d.BinDir, name, d.Tools[name])
	}
	script.WriteString("mkdir -p /etc/flexiq-scaled /var/lib/flexiq /etc/systemd/system/" + DaemonUnit + ".d\n")
	script.WriteString("chown flexiq:flexiq /var/lib/flexiq\n")
	sb.Sh(t, script.String())
	for path, content := range map[string]string{
		"/etc/systemd/system/" + DaemonUnit:                     string(unit),
		"/etc/systemd/system/" + DaemonUnit + ".d/50-test.conf": "[Service]\n" + d.DropIn,
	} {
		if err := sb.WriteFile(path, content); err != nil {
			t.Fatal(err)
		}
	}
	sb.Sh(t, "systemctl daemon-reload")
}
