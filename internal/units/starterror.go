package units

import "fmt"

// StartError is a start job that did not end "done". It carries what
// systemd said about the unit, so that callers can report the unit's own
// Result and exit status (203/EXEC for a missing binary, 217/USER for an
// unknown user) rather than only the job's result.
type StartError struct {
	Unit       string
	Rank       int    // the unit's rank in its gang group (0 for a single unit)
	JobResult  string // "failed", "timeout", "dependency", ...
	Result     string // the unit's Result, when it could be read: "exit-code", ...
	ExitStatus int32  // ExecMainStatus, when Result is known
}

func (e *StartError) Error() string {
	if e.Result == "" {
		return fmt.Sprintf("starting %s: start job %s", e.Unit, e.JobResult)
	}
	return fmt.Sprintf("starting %s: start job %s (result %s, exit status %d)", e.Unit, e.JobResult, e.Result, e.ExitStatus)
}
