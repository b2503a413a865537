package units

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"
)

// WorkerSpec describes one worker: a pool's command line and limits, and the
// slot it fills.
type WorkerSpec struct {
	Pool string
	Slot int

	Exec             []string
	User, Group      string // "" = omit (Group defaults to the user's group in systemd)
	WorkingDirectory string // "" = omit
	Environment      map[string]string

	KillSignal  int           // sent to the main process on stop; 0 = systemd's default (SIGTERM)
	StopTimeout time.Duration // before SIGKILL to the whole cgroup; 0 = systemd's default

	CPUQuotaPerSecUSec, MemoryMax, TasksMax uint64 // 0 = unset

	// Revision names the worker definition (the caller's hash of it). It is
	// kept in the unit's Description, which every unit listing carries, so
	// that a rollout can tell old workers from new ones without a property
	// read per unit. "" leaves it out.
	Revision string
}

// ErrUnitExists is wrapped by StartWorker's error when the unit is still
// loaded and not failed (e.g. running, or still stopping), so its slot is
// taken. Callers should re-list rather than pick the slot again.
var ErrUnitExists = errors.New("unit already exists")

const errUnitExists = "org.freedesktop.systemd1.UnitExists"

// properties is the transient unit's definition. Each value's Go type fixes
// its D-Bus signature, which must be exactly what systemd declares for the
// property: anything else is refused with "Invalid argument".
func (s WorkerSpec) properties() ([]sddbus.Property, error) {
	if !poolRE.MatchString(s.Pool) {
		return nil, fmt.Errorf("invalid pool name %q", s.Pool)
	}
	if s.Slot < 0 {
		return nil, fmt.Errorf("invalid slot %d", s.Slot)
	}
	if len(s.Exec) == 0 || s.Exec[0] == "" {
		return nil, errors.New("empty command line")
	}
	slot := strconv.Itoa(s.Slot)
	env := make(map[string]string, len(s.Environment)+2)
	for k, v := range s.Environment {
		env[k] = v
	}
	// Set last: a worker must always be able to tell who it is.
	env["FLEXIQ_SCALED_POOL"] = s.Pool
	env["FLEXIQ_SCALED_SLOT"] = slot
	envList := make([]string, 0, len(env))
	for k, v := range env {
		envList = append(envList, k+"="+v)
	}
	sort.Strings(envList) // deterministic unit definitions, easy to diff

	props := []sddbus.Property{
		prop("Description", s.description()),
		// exec, not simple: the start job then waits for execve() to
		// succeed, so a missing binary or user fails StartWorker itself.
		prop("Type", "exec"),
		// false = the exit status counts (systemd calls this ignore_failure).
		sddbus.PropExecStart(s.Exec, false),
		prop("Environment", envList),
		prop("Slice", SliceName(s.Pool)),
		// mixed: the drain signal reaches the main process only, which then
		// winds down its own children; the final SIGKILL reaches them all.
		prop("KillMode", "mixed"),
		prop("SendSIGKILL", true),
		prop("CPUAccounting", true),
		prop("MemoryAccounting", true),
		// journalctl FLEXIQ_POOL=<pool> shows the output of a pool's workers.
		prop("LogExtraFields", [][]byte{[]byte("FLEXIQ_POOL=" + s.Pool), []byte("FLEXIQ_SLOT=" + slot)}),
		// CollectMode stays "inactive": a failed worker stays loaded, with
		// its Result and exit status, until ResetFailed.
	}
	if s.User != "" {
		props = append(props, prop("User", s.User))
	}
	if s.Group != "" {
		props = append(props, prop("Group", s.Group))
	}
	if s.WorkingDirectory != "" {
		props = append(props, prop("WorkingDirectory", s.WorkingDirectory))
	}
	if s.KillSignal != 0 {
		props = append(props, prop("KillSignal", int32(s.KillSignal)))
	}
	if s.StopTimeout > 0 {
		props = append(props, prop("TimeoutStopUSec", uint64(s.StopTimeout/time.Microsecond)))
	}
	if s.CPUQuotaPerSecUSec != 0 {
		props = append(props, prop("CPUQuotaPerSecUSec", s.CPUQuotaPerSecUSec))
	}
	if s.MemoryMax != 0 {
		props = append(props, prop("MemoryMax", s.MemoryMax))
	}
	if s.TasksMax != 0 {
		props = append(props, prop("TasksMax", s.TasksMax))
	}
	return props, nil
}

func prop(name string, v any) sddbus.Property {
	return sddbus.Property{Name: name, Value: dbus.MakeVariant(v)}
}

// StartWorker starts the worker's transient unit and waits, bounded by ctx,
// for its start job. Result "done" returns nil; anything else is an error
// naming the unit and the job result and, for "failed", the unit's Result
// and exit status. A failed leftover of the same name (systemd answers
// UnitExists) is reset and the start retried once.
func (m *Manager) StartWorker(ctx context.Context, s WorkerSpec) error {
	unit := UnitName(s.Pool, s.Slot)
	props, err := s.properties()
	if err != nil {
		return fmt.Errorf("starting %s: %w", unit, err)
	}
	var result chan string
	start := func() error {
		// Buffered, and one per attempt: go-systemd delivers job results
		// while holding a lock that every other job waiter needs.
		result = make(chan string, 1)
		return m.call(ctx, "starting "+unit, func(c *sddbus.Conn) error {
			_, err := c.StartTransientUnitContext(ctx, unit, "fail", props, result)
			return err
		})
	}
	err = start()
	if err != nil && dbusErrorName(err) == errUnitExists {
		// The usual cause is a failed worker kept loaded for inspection.
		// Resetting a unit that is not failed does nothing, so a live
		// unit still makes the retry fail, as it must.
		if rerr := m.ResetFailed(ctx, unit); rerr != nil {
			return fmt.Errorf("starting %s: %w (and %v)", unit, err, rerr)
		}
		err = start()
	}
	if err != nil {
		if dbusErrorName(err) == errUnitExists {
			state := "unknown state"
			if st, serr := m.unitState(ctx, unit); serr == nil {
				state = st
			}
			return fmt.Errorf("%w: %s is %s: %v", ErrUnitExists, unit, state, err)
		}
		return err
	}
	select {
	case r := <-result:
		if r == "done" {
			return nil
		}
		return m.startFailure(ctx, unit, r)
	case <-ctx.Done():
		return fmt.Errorf("starting %s: waiting for the start job: %w", unit, ctx.Err())
	}
}

// startFailure explains a start job that did not end "done".
func (m *Manager) startFailure(ctx context.Context, unit, result string) error {
	e := &StartError{Unit: unit, JobResult: result}
	if result != "failed" {
		return e
	}
	var svc map[string]any
	err := m.call(ctx, "reading "+unit, func(c *sddbus.Conn) error {
		var err error
		svc, err = c.GetUnitTypePropertiesContext(ctx, unit, "Service")
		return err
	})
	if err == nil {
		e.Result, _ = svc["Result"].(string)
		e.ExitStatus, _ = svc["ExecMainStatus"].(int32)
	}
	return e
}

// unitState is "active/running" or the like, for error messages.
func (m *Manager) unitState(ctx context.Context, unit string) (string, error) {
	var st []sddbus.UnitStatus
	err := m.call(ctx, "reading "+unit, func(c *sddbus.Conn) error {
		var err error
		st, err = c.ListUnitsByNamesContext(ctx, []string{unit})
		return err
	})
	if err != nil || len(st) == 0 {
		return "", err
	}
	return st[0].ActiveState + "/" + st[0].SubState, nil
}

// StopWorker queues a stop job for unit (mode "replace", so it supersedes a
// queued start or restart) and returns at once. The buffered channel
// receives the job result ("done", "canceled", ...). If the bus connection
// is lost before the job ends, nothing arrives: callers bound their wait
// and re-list.
func (m *Manager) StopWorker(ctx context.Context, unit string) (<-chan string, error) {
	result := make(chan string, 1)
	err := m.call(ctx, "stopping "+unit, func(c *sddbus.Conn) error {
		_, err := c.StopUnitContext(ctx, unit, "replace", result)
		return err
	})
	if err != nil {
		return nil, err
	}
	return result, nil
}

// ResetFailed clears a failed unit's state so that systemd unloads it and
// its name can be used again.
func (m *Manager) ResetFailed(ctx context.Context, unit string) error {
	return m.call(ctx, "resetting failed "+unit, func(c *sddbus.Conn) error {
		return c.ResetFailedUnitContext(ctx, unit)
	})
}

// QueuedJob reports whether systemd holds a job of jobType ("start", "stop",
// "restart", ...) for unit, whether still waiting or already running. The
// daemon asks this about its own unit on SIGTERM: a restart must not drain
// workers, a stop must. (A restart job keeps type "restart" while its stop
// half runs, which is exactly when the SIGTERM arrives.)
func (m *Manager) QueuedJob(ctx context.Context, unit, jobType string) (bool, error) {
	var jobs []sddbus.JobStatus
	err := m.call(ctx, "listing jobs", func(c *sddbus.Conn) error {
		var err error
		jobs, err = c.ListJobsContext(ctx)
		return err
	})
	if err != nil {
		return false, err
	}
	for _, j := range jobs {
		if j.Unit == unit && j.JobType == jobType {
			return true, nil
		}
	}
	return false, nil
}

const revisionMark = " rev "

// description is the unit's Description: "flexiq-scaled worker POOL/SLOT",
// and " rev REVISION" when the spec has one.
func (s WorkerSpec) description() string {
	d := "flexiq-scaled worker " + s.Pool + "/" + strconv.Itoa(s.Slot)
	if s.Revision != "" {
		d += revisionMark + s.Revision
	}
	return d
}

// ParseRevision returns the revision recorded in a worker unit's
// Description, or "" if it has none (a worker of an older daemon).
func ParseRevision(description string) string {
	if i := strings.LastIndex(description, revisionMark); i >= 0 {
		return description[i+len(revisionMark):]
	}
	return ""
}
