package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// The sandbox of this test binary, set by Main. A test binary is one process
// running one package's tests, so one sandbox per binary is the natural unit.
var (
	current    *Sandbox
	skipReason string
)

// Main is for a test package's TestMain: it boots a sandbox named after
// opts.Name and this process, runs the tests, and stops the sandbox.
//
//	func TestMain(m *testing.M) { os.Exit(sandbox.Main(m, sandbox.Options{Name: "e2e"})) }
//
// The sandbox is owned by this process: if the tests fail, panic, time out or
// are interrupted, the keeper sees the process go and powers the sandbox off.
// Without root, overlayfs or cgroup2, the tests that call Get are skipped
// with the reason; a sandbox that fails to boot fails the run.
func Main(m *testing.M, opts Options) int {
	if why := Unsupported(); why != "" {
		skipReason = "end-to-end tests skipped: " + why
		fmt.Fprintln(os.Stderr, skipReason)
		return m.Run()
	}
	sweepStale()
	opts.Name = fmt.Sprintf("%s-%d", opts.Name, os.Getpid())
	if len(opts.Name) > 32 {
		opts.Name = opts.Name[len(opts.Name)-32:]
	}
	opts.OwnerPID = os.Getpid()
	if len(opts.Binds) == 0 {
		if root, err := ModuleRoot(); err == nil {
			opts.Binds = []string{root}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t0 := time.Now()
	sb, err := Start(ctx, opts)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: booting the systemd sandbox: %v\n", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "sandbox %s booted in %.2fs (pid %d, %s)\n", sb.Name, time.Since(t0).Seconds(), sb.PID, sb.SystemState)
	current = sb

	// On Ctrl-C, stop cleanly rather than leaving the keeper to notice.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sigs
		stopCurrent()
		fmt.Fprintf(os.Stderr, "interrupted by %s; sandbox stopped\n", s)
		os.Exit(130)
	}()
	code := m.Run()
	if err := stopCurrent(); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: stopping the systemd sandbox: %v\n", err)
		return 1
	}
	return code
}

func stopCurrent() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return current.Stop(ctx)
}

// Get returns the test binary's sandbox, or skips the test saying why there is none.
func Get(t testing.TB) *Sandbox {
	t.Helper()
	if current == nil {
		if skipReason == "" {
			t.Fatal("sandbox.Get called without sandbox.Main in TestMain")
		}
		t.Skip(skipReason)
	}
	return current
}

// sweepStale clears sandboxes whose keeper died without cleaning up, e.g.
// after a SIGKILL of the whole process group.
func sweepStale() {
	defer sweepLinks(context.Background())
	for _, name := range List() {
		sb, err := Attach(name)
		orphaned := err != nil || !alive(sb.KeeperPID, sb.KeeperStartTime) ||
			(sb.OwnerPID != 0 && !processExists(sb.OwnerPID))
		if orphaned {
			if err := clearStale(context.Background(), name); err != nil {
				fmt.Fprintf(os.Stderr, "clearing stale sandbox %s: %v\n", name, err)
			}
		}
	}
}

// ModuleRoot is the directory holding go.mod, above the working directory.
// Tests run in their package's directory; the checkout is bind-mounted into
// the sandbox at the same path, so binaries built there run inside.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}
