package units

import (
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// runningCache keeps the properties of running workers from one listing to
// the next. Reading a unit's properties costs PID 1 a message of some 300
// of them and costs the daemon their decoding: at 500 workers and every
// tick, a quarter of a second of PID 1's CPU. Yet while a worker runs,
// nothing that Worker holds can change except through a new invocation of
// the unit, and a new invocation of a running service always begins with
// the end of its main process: a restart stops it first, a crash is its
// end. So the cache holds a pidfd of each worker's main process, all in one
// epoll set, and a listing asks the set, in one call whatever the number of
// workers, which main processes have ended since the last listing. A worker
// that the listing still shows as active/running and whose main process
// lives is taken from here; any other worker is read afresh.
//
// Not the cgroup's invocation_id attribute: systemd (252) leaves the old ID
// on a cgroup that a restart reuses because processes outlived the stop (a
// drop-in's KillMode=process), and reading it costs a path walk per worker
// per tick. Not the unit's signals either: the cache must not depend on a
// message arriving. The one miss left is KillMode=none, deprecated, where
// the main process may outlive its own unit's stop; the ID attribute misses
// that case too.
//
// With the properties, the cache keeps the worker's cpu.stat open, so that
// sampling its CPU at every tick is one read rather than a path walk, an
// open, a read and a close (cpu.go). Where pidfds or epoll are unavailable,
// nothing is cached and every listing reads every worker, as before.
type runningCache struct {
	mu      sync.Mutex
	workers map[string]*cached
	byFD    map[int32]*cached // by pidfd
	ep      int               // epoll; 0 = not yet made, -1 = unavailable
	// openPIDFD is Options.OpenPIDFD.
	openPIDFD func(pid uint32) (int, error)
	// cpuBuf is readCPU's buffer, under mu: a local one escapes to the
	// heap, 1 KB per worker at every sample.
	cpuBuf [1024]byte
}

type cached struct {
	w     Worker
	pidfd int      // of w.MainPID
	cpu   *os.File // the cgroup's cpu.stat; nil until first sampled
}

// cacheable says whether w may be kept: it runs, under a known invocation
// and main process.
func cacheable(w Worker) bool {
	return w.ActiveState == "active" && w.SubState == "running" && w.InvocationID != "" && w.ControlGroup != "" && w.MainPID > 0
}

// get returns the kept properties of unit if the listing still shows it
// running and its main process has not ended (as of the last sync).
// description is the listing's, which `systemctl set-property` can change
// without a restart.
func (c *runningCache) get(unit, active, sub, description string) (Worker, bool) {
	if active != "active" || sub != "running" {
		return Worker{}, false
	}
	c.mu.Lock()
	e, ok := c.workers[unit]
	var w Worker
	if ok {
		w = e.w
	}
	c.mu.Unlock()
	if !ok {
		return Worker{}, false
	}
	if w.Description != description {
		w.Description, w.Revision = description, ParseRevision(description)
	}
	return w, true
}

// sync forgets the workers whose main process has ended: called once per
// listing, after systemd answered it, so that whatever ended before the
// listing's state was taken is known.
func (c *runningCache) sync() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ep <= 0 {
		return
	}
	var evs [64]unix.EpollEvent
	for {
		n, err := unix.EpollWait(c.ep, evs[:], 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			// Cannot tell what ended: trust nothing kept.
			c.forgetAll()
			return
		}
		for _, ev := range evs[:n] {
			if e, ok := c.byFD[ev.Fd]; ok {
				c.forget(e)
			}
		}
		if n < len(evs) {
			return
		}
	}
}

// put keeps w if it is cacheable, and forgets its unit otherwise.
func (c *runningCache) put(w Worker) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old, had := c.workers[w.Unit]
	if had && old.w.InvocationID == w.InvocationID && old.w.MainPID == w.MainPID && cacheable(w) {
		old.w = w.detached() // the same invocation: its pidfd and cpu.stat stay valid
		return
	}
	if had {
		c.forget(old)
	}
	if !cacheable(w) || !c.ready() {
		return
	}
	// The main process is the one read with the properties a moment ago.
	// Had it ended since, the pidfd is born readable (a zombie) or cannot
	// be had (reaped): either way the next listing reads the unit again.
	// Only a PID reused within that moment could fool it, which the kernel's
	// sequential PID allocation rules out.
	fd, err := c.openPIDFD(w.MainPID)
	if err != nil {
		return
	}
	unix.CloseOnExec(fd)
	if err := unix.EpollCtl(c.ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}); err != nil {
		unix.Close(fd)
		return
	}
	e := &cached{w: w.detached(), pidfd: fd}
	c.workers[w.Unit] = e
	c.byFD[int32(fd)] = e
}

// ready makes the epoll set on first use; false if it cannot be had.
func (c *runningCache) ready() bool {
	if c.ep == 0 {
		ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if err != nil {
			c.ep = -1
			return false
		}
		c.ep = ep
		c.workers, c.byFD = map[string]*cached{}, map[int32]*cached{}
	}
	return c.ep > 0
}

// forget drops one worker and closes its files (closing the pidfd also
// takes it out of the epoll set).
func (c *runningCache) forget(e *cached) {
	delete(c.workers, e.w.Unit)
	delete(c.byFD, int32(e.pidfd))
	unix.Close(e.pidfd)
	if e.cpu != nil {
		e.cpu.Close()
	}
}

func (c *runningCache) forgetAll() {
	for _, e := range c.workers {
		c.forget(e)
	}
}

// prune forgets the units whose names start with prefix and that the
// latest listing did not show.
func (c *runningCache) prune(prefix string, listed map[string]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for unit, e := range c.workers {
		if strings.HasPrefix(unit, prefix) && !listed[unit] {
			c.forget(e)
		}
	}
}

// closeAll forgets everything and closes the epoll set (Manager.Close).
func (c *runningCache) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forgetAll()
	if c.ep > 0 {
		unix.Close(c.ep)
		c.ep = -1
	}
}

// readCPU reads w's cpu.stat through the file kept open for its
// invocation, opening it on first use. ok is false when w is not cached
// under this invocation; the caller then reads the file by its path.
func (c *runningCache) readCPU(w Worker, path string) (d time.Duration, ok bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, found := c.workers[w.Unit]
	if !found || e.w.InvocationID != w.InvocationID || w.InvocationID == "" {
		return 0, false, nil
	}
	if e.cpu == nil {
		if e.cpu, err = os.Open(path); err != nil {
			e.cpu = nil
			return 0, true, err
		}
	}
	// Offset 0 makes the kernel generate the file afresh.
	n, err := e.cpu.ReadAt(c.cpuBuf[:], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		// The cgroup is gone (ENODEV): the unit stopped since it was
		// listed. Close the file; the next listing forgets the rest.
		e.cpu.Close()
		e.cpu = nil
		return 0, true, err
	}
	d, err = parseCPUStat(path, c.cpuBuf[:n])
	return d, true, err
}

// detached copies w's strings out of the D-Bus decoder's buffers. godbus
// cuts decoded strings out of shared 4 KB blocks, so one string kept for
// hours would keep its whole block, and the blocks of a property read of
// some 300 values: at 500 cached workers, megabytes of the daemon's RSS.
func (w Worker) detached() Worker {
	for _, s := range []*string{&w.Unit, &w.Pool, &w.Description, &w.Revision, &w.ActiveState, &w.SubState, &w.Result, &w.InvocationID, &w.ControlGroup} {
		*s = strings.Clone(*s)
	}
	if w.Environment != nil {
		env := make([]string, len(w.Environment))
		for i, kv := range w.Environment {
			env[i] = strings.Clone(kv)
		}
		w.Environment = env
	}
	return w
}
