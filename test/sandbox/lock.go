package sandbox

import (
	"fmt"
	"os"
	"sync"
	"syscall"
)

// SuiteLock is the file whose flock serialises sandbox suites on this
// machine: several systemd sandboxes booted by different test processes at
// once have hung this kernel (tasks stuck in D state). One process holds it
// for its whole life, so one suite may still boot several sandboxes of its
// own (the fault suite does); the keepers inherit it, so the lock is freed
// only once the last sandbox of the suite is gone. FLEXIQ_SANDBOX_LOCK
// names another file.
var SuiteLock = "/run/flexiq-sandbox.lock"

var (
	lockOnce sync.Once
	lockFile *os.File
	lockErr  error
)

// holdSuiteLock takes the machine's sandbox lock for this process, waiting
// (and saying so) while another suite holds it.
func holdSuiteLock() (*os.File, error) {
	lockOnce.Do(func() {
		path := SuiteLock
		if p := os.Getenv("FLEXIQ_SANDBOX_LOCK"); p != "" {
			path = p
		}
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			lockErr = fmt.Errorf("sandbox lock %s: %w", path, err)
			return
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			fmt.Fprintf(os.Stderr, "sandbox: waiting for %s: another sandbox suite runs on this machine\n", path)
			if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
				f.Close()
				lockErr = fmt.Errorf("sandbox lock %s: %w", path, err)
				return
			}
		}
		lockFile = f
	})
	return lockFile, lockErr
}
