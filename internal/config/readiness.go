package config

import (
	"regexp"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The keys of issue 9 that govern when a worker may start and how it
// leaves: requires and start_condition (readiness), quiet_signal and
// quiet_period_sec (the first phase of a two-phase drain).

// unitNameRE is a systemd unit name that a worker may depend on: a name
// with one of the unit types' suffixes, an instance after "@" if it is a
// template. A bare template ("foo@.service") names no unit.
var unitNameRE = regexp.MustCompile(`^[A-Za-z0-9:_.\\-]+(@[A-Za-z0-9:_.\\-]+)?\.(service|socket|target|mount|automount|swap|path|timer|device|scope|slice)$`)

// readiness fills Requires, StartCondition, QuietSignal and QuietPeriod.
func (l *loader) readiness(p *Pool, r *rawPool, key func(...string) string) {
	var req []string
	if l.strings(key("requires"), r.Requires, &req) {
		seen := map[string]bool{}
		for _, u := range req {
			switch {
			case !unitNameRE.MatchString(u) || len(u) > 255:
				l.add(key("requires"), "%q is not a unit name (as in \"postgresql.service\")", u)
			case strings.HasPrefix(u, "flexiq-") && strings.Contains(u, "@"):
				l.add(key("requires"), "%q is a worker of flexiq-scaled: workers cannot depend on workers", u)
			case seen[u]:
				l.add(key("requires"), "%q is listed twice", u)
			default:
				seen[u] = true
				p.Requires = append(p.Requires, u)
			}
		}
	}

	k := key("start_condition")
	switch raw := r.StartCondition.raw.(type) {
	case nil:
	case string:
		// A string is a shell command, as the n8n autoscaler's
		// "test -s /srv/shared/ready" is most easily written.
		if strings.TrimSpace(raw) == "" {
			l.add(k, "must not be empty")
		} else {
			p.StartCondition = []string{"/bin/sh", "-c", raw}
		}
	case []any:
		var argv []string
		if l.strings(k, r.StartCondition, &argv) {
			switch {
			case len(argv) == 0 || argv[0] == "":
				l.add(k, "the command (first element) must not be empty")
			case !strings.HasPrefix(argv[0], "/"):
				// ExecCondition= takes a plain name too, but an
				// absolute path says exactly what runs as the check.
				l.add(k, "the command %q must be an absolute path", argv[0])
			default:
				p.StartCondition = argv
			}
		}
	default:
		l.wrongType(k, "a string (a shell command) or an array of strings (a command line)", r.StartCondition)
	}

	quietSet := l.signal(key("quiet_signal"), r.QuietSignal, &p.QuietSignal, &p.QuietSignalNumber)
	period := time.Duration(0)
	periodSet := l.seconds(key("quiet_period_sec"), r.QuietPeriodSec, &period)
	switch {
	case periodSet && period <= 0:
		l.add(key("quiet_period_sec"), "must be > 0; leave quiet_signal and quiet_period_sec out for a one-phase drain")
	case quietSet && !periodSet:
		l.add(key("quiet_period_sec"), "missing: quiet_signal needs the time to wait before the stop")
	case periodSet && !r.QuietSignal.set():
		l.add(key("quiet_signal"), "missing: quiet_period_sec needs the signal that quiets a worker (Sidekiq's is \"TSTP\")")
	case quietSet && p.QuietSignalNumber == p.DrainSignalNumber:
		l.add(key("quiet_signal"), "%s is also the drain signal: the worker would stop at once, not go quiet", p.QuietSignal)
	case quietSet:
		p.QuietPeriod = period
	}
	if !quietSet || p.QuietPeriod == 0 {
		p.QuietSignal, p.QuietSignalNumber, p.QuietPeriod = "", 0, 0
	}
}

// signal reads a signal's name ("TERM", "SIGTERM", "sigterm") into its
// canonical name and number. SIGKILL and SIGSTOP are refused: a worker
// cannot catch them, so it could neither drain nor go quiet.
func (r *reader) signal(key string, v value, name *string, num *int) bool {
	var written string
	if !r.str(key, v, &written) {
		return false
	}
	n := strings.ToUpper(written)
	if !strings.HasPrefix(n, "SIG") {
		n = "SIG" + n
	}
	switch sig := unix.SignalNum(n); sig {
	case 0:
		r.add(key, "unknown signal %q", written)
	case unix.SIGKILL, unix.SIGSTOP:
		r.add(key, "%s cannot be caught, so workers could not drain", n)
	default:
		*name, *num = n, int(sig)
		return true
	}
	return false
}
