package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// SuiteLock is the file whose flock serialises sandbox suites on this
// machine: several systemd sandboxes booted by different test processes at
// once have hung this kernel (tasks stuck in D state). One process holds it
// for its whole life, so one suite may still boot several sandboxes of its
// own (the fault suite does); the keepers inherit it, so the lock is freed
// only once the last sandbox of the suite is gone. FLEXIQ_SANDBOX_LOCK
// names another file.
var SuiteLock = "/run/flexiq-sandbox.lock"

// heldEnv, set by the holder, is inherited by the processes it starts.
const heldEnv = "FLEXIQ_SANDBOX_LOCK_HELD"

var (
	lockOnce sync.Once
	lockFile *os.File
	lockErr  error
)

// afterSuiteLock takes the machine's sandbox lock for this process and
// returns ctx with its deadline moved on by the time spent waiting for it:
// a caller's boot timeout is for booting, not for another suite's run.
// Cancelling ctx for any other reason still cancels the returned context.
func afterSuiteLock(ctx context.Context) (context.Context, context.CancelFunc, *os.File, error) {
	t0 := time.Now()
	lock, err := holdSuiteLock()
	if err != nil {
		return ctx, func() {}, nil, err
	}
	waited := time.Since(t0)
	dl, ok := ctx.Deadline()
	if !ok || waited < time.Second {
		return ctx, func() {}, lock, nil
	}
	moved, cancel := context.WithDeadline(context.WithoutCancel(ctx), dl.Add(waited))
	stop := context.AfterFunc(ctx, func() {
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			cancel()
		}
	})
	return moved, func() { stop(); cancel() }, lock, nil
}

// holdSuiteLock takes the machine's sandbox lock for this process, waiting
// (and saying so) while another suite holds it.
func holdSuiteLock() (*os.File, error) {
	lockOnce.Do(func() {
		// A process started by the holder (the sandbox CLI that a test
		// runs) belongs to the holder's suite: waiting would deadlock it.
		if os.Getenv(heldEnv) != "" {
			return
		}
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
		os.Setenv(heldEnv, strconv.Itoa(os.Getpid()))
	})
	return lockFile, lockErr
}
