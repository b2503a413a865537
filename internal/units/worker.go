package units

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

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
	// EnvironmentFiles are read by systemd (as root, before it drops to
	// User) at every start: absolute paths, a leading "-" meaning a missing
	// file is fine. Their variables override Environment's.
	EnvironmentFiles []string

	// Hardening is a sandboxing preset: HardeningNone, HardeningDefault
	// (also for "") or HardeningStrict. See hardening.go.
	Hardening string

	// Revision names the worker's definition, e.g. a hash of it, so that a
	// listed worker tells which one it runs (Worker.Revision). "" = none.
	// No white space or control characters.
	Revision string

	KillSignal int // sent to the main process on stop; 0 = systemd's default (SIGTERM)
	// StopTimeout is the wait before SIGKILL to the whole cgroup; 0 = no
	// limit: systemd waits for the worker however long it takes.
	StopTimeout time.Duration

	CPUQuotaPerSecUSec, MemoryMax, TasksMax uint64 // 0 = unset

	// Requires are units the worker needs (Requires= and After=), and
	// StartCondition its ExecCondition= command line; see readiness.go.
	Requires, StartCondition []string

	// Ranks, with two or more entries, makes the worker a gang group
	// (issue 19): one unit per rank, all started in one transaction, rank 0
	// being UnitName(Pool, Slot) and rank R RankUnitName(Pool, Slot, R).
	// Any rank's exit stops every rank, held by systemd's dependencies
	// (BindsTo=), also while the daemon is down. Nil or one entry: a
	// single unit.
	Ranks []RankSpec
	// NotifyReady runs the worker as Type=notify, so that it is active
	// only once it has sent READY=1. StartWorker then does not wait for
	// the start job (a model may load for minutes): it returns once the job
	// is queued, and the listing tells activating from active.
	NotifyReady bool
	// Socket, if set, is a port that systemd binds for the worker and
	// passes to it (socket.go). Not for a gang group.
	Socket *SocketSpec
}

// RankSpec is what differs between the ranks of a gang group.
type RankSpec struct {
	// Environment adds to the WorkerSpec's (rank, peers, the rank's ports).
	Environment map[string]string
	// AllowedCPUs is the rank's cpuset, e.g. "0-1" ("" = unset).
	AllowedCPUs string
}

// RankUnitName is the unit of rank R >= 1 of the gang group in slot; rank
// 0 is UnitName(pool, slot), the replica's own unit.
func RankUnitName(pool string, slot, rank int) string {
	return fmt.Sprintf("%s%s@%d-r%d%s", unitPrefix, pool, slot, rank, unitSuffix)
}

// ErrUnitExists is wrapped by StartWorker's error when the unit is still
// loaded and not failed (e.g. running, or still stopping), so its slot is
// taken. Callers should re-list rather than pick the slot again.
var ErrUnitExists = errors.New("unit already exists")

const errUnitExists = "org.freedesktop.systemd1.UnitExists"

// Properties is the transient unit's definition, exactly as StartWorker
// sends it (the scale-out benchmark starts the same units without the
// daemon, for PID 1's own floor): of rank 0, for a gang group.
func (s WorkerSpec) Properties() ([]sddbus.Property, error) {
	return s.RankProperties(0)
}

// RankProperties is the definition of the unit of one rank of the worker
// (0 for a single unit). Each value's Go type fixes its D-Bus signature,
// which must be exactly what systemd declares for the property: anything
// else is refused with "Invalid argument".
func (s WorkerSpec) RankProperties(rank int) ([]sddbus.Property, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	if rank < 0 || rank >= max(1, len(s.Ranks)) {
		return nil, fmt.Errorf("rank %d of a worker of %d ranks", rank, max(1, len(s.Ranks)))
	}
	envFiles, err := environmentFiles(s.EnvironmentFiles)
	if err != nil {
		return nil, err
	}
	hardened, err := hardening(s.Hardening, s.WorkingDirectory)
	if err != nil {
		return nil, err
	}
	slot := strconv.Itoa(s.Slot)
	var rs RankSpec
	if len(s.Ranks) > 0 {
		rs = s.Ranks[rank]
	}
	cpus, err := cpuSetMask(rs.AllowedCPUs)
	if err != nil {
		return nil, fmt.Errorf("rank %d: AllowedCPUs: %w", rank, err)
	}
	name, logFields := slot, [][]byte{[]byte("FLEXIQ_POOL=" + s.Pool), []byte("FLEXIQ_SLOT=" + slot)}
	if s.isGroup() {
		name += rankMarker + strconv.Itoa(rank)
		logFields = append(logFields, []byte("FLEXIQ_RANK="+strconv.Itoa(rank)))
	}

	props := []sddbus.Property{
		prop("Description", description(s.Pool, name, s.Revision)),
		sddbus.PropExecStart(s.Exec, false), // false = the exit status counts (systemd's ignore_failure)
		prop("Environment", s.environment(slot, rs.Environment)),
		prop("Slice", SliceName(s.Pool)),
		// mixed: the drain signal reaches the main process only, which then
		// winds down its own children; the final SIGKILL reaches them all.
		prop("KillMode", "mixed"),
		prop("SendSIGKILL", true),
		prop("CPUAccounting", true),
		prop("MemoryAccounting", true),
		// journalctl FLEXIQ_POOL=<pool> shows the output of a pool's workers.
		prop("LogExtraFields", logFields),
		// CollectMode stays "inactive": a failed worker stays loaded, with
		// its Result and exit status, until ResetFailed.
	}
	if s.NotifyReady {
		// main: only the worker itself may say it is ready, not some
		// child it runs.
		props = append(props, prop("Type", "notify"), prop("NotifyAccess", "main"),
			// Not systemd's 90 s default: a model may load for longer.
			// How long a replica may take is the pool's to judge (it
			// stops one that is never ready), not the start job's.
			prop("TimeoutStartUSec", uint64(math.MaxUint64)))
	} else {
		// exec, not simple: the start job then waits for execve() to
		// succeed, so a missing binary or user fails StartWorker itself.
		props = append(props, prop("Type", "exec"))
	}
	if len(cpus) > 0 {
		props = append(props, prop("AllowedCPUs", cpus))
	}
	if len(envFiles) > 0 {
		props = append(props, prop("EnvironmentFiles", envFiles))
	}
	props = append(props, s.optionalProperties()...)
	props = append(props, s.groupProperties(rank)...)
	props = append(props, s.readinessProperties()...)
	props = append(props, s.socketServiceProperties()...)
	return append(props, hardened...), nil
}

// accountProperties are User= and Group=, each only when set: a unit
// without them runs as its service manager does (root, or a user manager's
// own user), and one without Group= in the user's primary group. Workers
// and command probes (CommandRunner.As) run as their pool's user so.
func accountProperties(user, group string) []sddbus.Property {
	var props []sddbus.Property
	if user != "" {
		props = append(props, prop("User", user))
	}
	if group != "" {
		props = append(props, prop("Group", group))
	}
	return props
}

// optionalProperties are the properties set only when the spec asks.
func (s WorkerSpec) optionalProperties() []sddbus.Property {
	props := accountProperties(s.User, s.Group)
	if s.WorkingDirectory != "" {
		props = append(props, prop("WorkingDirectory", s.WorkingDirectory))
	}
	if s.KillSignal != 0 {
		props = append(props, prop("KillSignal", int32(s.KillSignal)))
	}
	// Always set: left unset, it would be systemd's DefaultTimeoutStopSec
	// (90 s), not "no limit".
	stopTimeout := uint64(math.MaxUint64) // USEC_INFINITY
	if s.StopTimeout > 0 {
		stopTimeout = uint64(s.StopTimeout / time.Microsecond)
	}
	props = append(props, prop("TimeoutStopUSec", stopTimeout))
	if s.CPUQuotaPerSecUSec != 0 {
		props = append(props, prop("CPUQuotaPerSecUSec", s.CPUQuotaPerSecUSec))
	}
	if s.MemoryMax != 0 {
		props = append(props, prop("MemoryMax", s.MemoryMax))
	}
	if s.TasksMax != 0 {
		props = append(props, prop("TasksMax", s.TasksMax))
	}
	return props
}

const (
	descriptionPrefix = "flexiq-scaled worker "
	revisionMarker    = " rev "
	maxRevision       = 128
)

// description is the unit's Description: "flexiq-scaled worker POOL/SLOT",
// followed by " rev REVISION" when there is one.
func description(pool, slot, revision string) string {
	d := descriptionPrefix + pool + "/" + slot
	if revision != "" {
		d += revisionMarker + revision
	}
	return d
}

// ParseRevision returns the revision that a worker unit's Description
// carries, or "" if it carries none (a worker started without one, or by an
// older version) or is not a worker's description.
func ParseRevision(description string) string {
	rest, ok := strings.CutPrefix(description, descriptionPrefix)
	if !ok {
		return ""
	}
	// POOL/SLOT has no spaces, so the first marker is the one.
	name, rev, ok := strings.Cut(rest, revisionMarker)
	if !ok || strings.ContainsAny(name, " \t\n") || rev == "" || !validRevision(rev) {
		return ""
	}
	return rev
}

func validRevision(r string) bool {
	if len(r) > maxRevision {
		return false
	}
	for _, c := range r {
		if unicode.IsSpace(c) || unicode.IsControl(c) || c == utf8.RuneError {
			return false
		}
	}
	return true
}

func prop(name string, v any) sddbus.Property {
	return sddbus.Property{Name: name, Value: dbus.MakeVariant(v)}
}

// StartWorker starts the worker's transient unit and waits, bounded by ctx,
// for its start job. Result "done" returns nil; anything else is an error
// naming the unit and the job result and, for "failed", the unit's Result
// and exit status. A failed leftover of the same name (systemd answers
// UnitExists) is reset and the start retried once.
//
// A gang group (two or more Ranks) starts in one transaction (group.go);
// with NotifyReady, StartWorker returns once the start job is queued.
func (m *Manager) StartWorker(ctx context.Context, s WorkerSpec) error {
	if s.isGroup() {
		return m.startGroup(ctx, s)
	}
	if s.Socket != nil {
		return m.startSocketed(ctx, s)
	}
	unit := UnitName(s.Pool, s.Slot)
	props, err := s.Properties()
	if err != nil {
		return fmt.Errorf("starting %s: %w", unit, err)
	}
	var result chan string
	var sentOn *conn
	start := func() error {
		// Buffered, and one per attempt: go-systemd delivers job results
		// while holding a lock that every other job waiter needs.
		result = make(chan string, 1)
		return m.call(ctx, "starting "+unit, func(c *conn) error {
			sentOn = c
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
	if s.NotifyReady {
		// The job ends at READY=1, maybe minutes from now: the listing
		// tells activating from active, and a failure from both.
		return m.awaitJobRunning(ctx, []string{unit})
	}
	r, err := m.awaitStartJob(ctx, unit, result, sentOn)
	switch {
	case err != nil:
		return fmt.Errorf("starting %s: waiting for the start job: %w", unit, err)
	case r == "done":
		return m.afterStart(ctx, s, unit)
	case r == "skipped" && len(s.StartCondition) > 0:
		// The job result of a unit whose conditions failed.
		return fmt.Errorf("starting %s: %w (ExecCondition %q)", unit, ErrConditionSkipped, s.StartCondition)
	}
	return m.startFailure(ctx, unit, r)
}

// StopWorker queues a stop job for unit (mode "replace", so it supersedes a
// queued start or restart) and returns at once. The buffered channel
// receives the job result ("done", "canceled", ...). If the bus connection
// is lost before the job ends, nothing arrives: callers bound their wait
// and re-list.
//
// A worker with a socket (WorkerSpec.Socket) has its socket stopped first
// and at once, so that the port refuses connections as soon as the worker
// closes its copy (socket.go).
//
// Stopping rank 0 of a gang group stops every rank (BindsTo=), each with
// its own stop signal and timeout, in parallel; the job result is rank
// 0's. If rank 0 is gone already (Worker.Missing), its ranks are stopped
// instead, and the channel receives once all their jobs have ended.
func (m *Manager) StopWorker(ctx context.Context, unit string) (<-chan string, error) {
	// An error is moot: BindsTo= stops the socket once the service is
	// down; only the early close is lost.
	_ = m.stopSocket(ctx, unit)
	result := make(chan string, 1)
	err := m.call(ctx, "stopping "+unit, func(c *conn) error {
		_, err := c.StopUnitContext(ctx, unit, "replace", result)
		return err
	})
	if err != nil && dbusErrorName(err) == errNoSuchUnit {
		if ranks, ok := m.stopRanks(ctx, unit); ok {
			return ranks, nil
		}
	}
	if err != nil {
		return nil, err
	}
	return result, nil
}

// QueuedJob reports whether systemd holds a job of jobType ("start", "stop",
// "restart", ...) for unit, whether still waiting or already running. The
// daemon asks this about its own unit on SIGTERM: a restart must not drain
// workers, a stop must. (A restart job keeps type "restart" while its stop
// half runs, which is exactly when the SIGTERM arrives.)
func (m *Manager) QueuedJob(ctx context.Context, unit, jobType string) (bool, error) {
	var jobs []sddbus.JobStatus
	err := m.call(ctx, "listing jobs", func(c *conn) error {
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

// environment is the workers' Environment=: the spec's, then the rank's
// over it, sorted so that unit definitions are deterministic and easy to
// diff.
func (s WorkerSpec) environment(slot string, rank map[string]string) []string {
	env := make(map[string]string, len(s.Environment)+len(rank)+2)
	for k, v := range s.Environment {
		env[k] = v
	}
	for k, v := range rank {
		env[k] = v
	}
	// Set last: a worker must always be able to tell who it is. Every rank
	// of a group has the group's slot: its rank is the caller's to name.
	env["FLEXIQ_SCALED_POOL"] = s.Pool
	env["FLEXIQ_SCALED_SLOT"] = slot
	envList := make([]string, 0, len(env))
	for k, v := range env {
		envList = append(envList, k+"="+v)
	}
	sort.Strings(envList)
	return envList
}

// validate refuses a spec that systemd would take but that would make a
// worker the daemon cannot tell apart or stop.
func (s WorkerSpec) validate() error {
	switch {
	case !poolRE.MatchString(s.Pool):
		return fmt.Errorf("invalid pool name %q", s.Pool)
	case s.Slot < 0:
		return fmt.Errorf("invalid slot %d", s.Slot)
	case len(s.Exec) == 0 || s.Exec[0] == "":
		return errors.New("empty command line")
	case s.StopTimeout < 0:
		return fmt.Errorf("negative stop timeout %v", s.StopTimeout)
	case !validRevision(s.Revision):
		return fmt.Errorf("invalid revision %q: no white space or control characters, at most %d bytes", s.Revision, maxRevision)
	case s.Socket != nil && s.isGroup():
		return errors.New("a socket for a gang group: one socket unit per worker, and a group is several")
	}
	return nil
}
