package units

// How StartWorker waits for a start job and reads what it came to.

import (
	"context"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
)

// lostSignalCheck is how often a start job's wait looks whether the
// connection its result would come on is still up.
const lostSignalCheck = 250 * time.Millisecond

// awaitStartJob waits for the result of unit's start job. go-systemd
// delivers it from the JobRemoved signal on the connection the start was
// sent on; when that connection dies (the bus daemon restarted), the signal
// is lost for good, and the wait would last until ctx ends although
// systemd went on with the job. Then the job's end is read from the unit's
// listing instead, on whatever connection the Manager has by then.
func (m *Manager) awaitStartJob(ctx context.Context, unit string, result <-chan string, sentOn *conn) (string, error) {
	check := time.NewTicker(lostSignalCheck)
	defer check.Stop()
	for {
		select {
		case r := <-result:
			return r, nil
		case <-ctx.Done():
			return "", ctx.Err()
		case <-check.C:
			if sentOn.Connected() {
				continue
			}
			st, err := m.pollUnits(ctx, []string{unit}, "the start job of "+unit, func(u sddbus.UnitStatus) bool { return u.JobId != 0 })
			if err != nil {
				return "", err
			}
			return jobResultOf(st[0]), nil
		}
	}
}

// jobResultOf tells a start job's result from the state it left the unit
// in. A failed worker stays loaded (CollectMode=inactive); one that ran and
// exited already, or whose ExecCondition failed, is inactive or collected
// already: "done" here, and afterStart tells those two apart as it does for
// a job that said "done".
func jobResultOf(u sddbus.UnitStatus) string {
	if u.ActiveState == "failed" {
		return "failed"
	}
	return "done"
}

// awaitJobRunning returns once the start jobs of units have begun to run.
// A notify worker's start job ends only at READY=1, so StartWorker does not
// wait for its end; but until the job runs, the unit is listed "inactive",
// which a listing taken meanwhile would read as a worker already gone. A
// unit whose job is over without starting it (a failed start, a skipped
// condition) or that is not loaded is the listing's to report.
func (m *Manager) awaitJobRunning(ctx context.Context, units []string) error {
	_, err := m.pollUnits(ctx, units, "the start job of "+units[0]+" to run", func(u sddbus.UnitStatus) bool {
		return u.LoadState == "loaded" && u.ActiveState == "inactive" && u.JobId != 0
	})
	return err
}

// startFailure explains a start job that did not end "done".
func (m *Manager) startFailure(ctx context.Context, unit, result string) error {
	e := &StartError{Unit: unit, JobResult: result}
	if result != "failed" {
		return e
	}
	if svc, err := m.serviceProperties(ctx, unit); err == nil {
		e.Result, _ = svc["Result"].(string)
		e.ExitStatus, _ = svc["ExecMainStatus"].(int32)
	}
	return e
}

// unitState is "active/running" or the like, for error messages.
func (m *Manager) unitState(ctx context.Context, unit string) (string, error) {
	var st []sddbus.UnitStatus
	err := m.call(ctx, "reading "+unit, func(c *conn) error {
		var err error
		st, err = c.ListUnitsByNamesContext(ctx, []string{unit})
		return err
	})
	if err != nil || len(st) == 0 {
		return "", err
	}
	return st[0].ActiveState + "/" + st[0].SubState, nil
}
