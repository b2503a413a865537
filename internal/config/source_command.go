package config

import (
	"fmt"
	"path/filepath"
)

// SourceCommand runs a command that prints the counts as JSON: the escape
// hatch for any queue that no other type reads.
const SourceCommand = "command"

// DefaultCommandTimeoutSec is how long a command source's command may run
// when timeout_sec is not set. The tick bounds it as well.
const DefaultCommandTimeoutSec = 10

// Command holds the settings of the command source type.
type Command struct {
	// Command is the argv to run, without a shell: an absolute path, then
	// its arguments.
	Command []string
	// TimeoutSec bounds each run, in seconds; the pool's tick bounds it too.
	TimeoutSec float64
}

// rawCommand holds their keys as written; embedded in rawSource, so that its
// fields are keys of [pools.NAME.source] itself.
type rawCommand struct {
	Command    value `toml:"command"`
	TimeoutSec value `toml:"timeout_sec"`
}

// effectiveCommand is how WriteEffective writes them; embedded in
// effectiveSource. Fields need omitempty: other types leave them unset.
type effectiveCommand struct {
	Command    []string `toml:"command,omitempty"`
	TimeoutSec float64  `toml:"timeout_sec,omitzero"`
}

func (s Source) effectiveCommand() effectiveCommand { return effectiveCommand(s.Command) }

func init() {
	registerSource(sourceKind{name: SourceCommand, keys: []string{"command", "timeout_sec"}, check: checkCommand})
}

// checkCommand checks a command source: an argv whose program is an
// absolute path the daemon can see, and a positive timeout.
func checkCommand(l *loader, s *Source, r *rawSource, key func(string) string) {
	c := &s.Command
	switch {
	case !r.Command.set():
		l.add(key("command"), `missing: the command to run, as an array (no shell), e.g. ["/usr/local/bin/queue-depth", "--queue", "mail"]`)
	case !l.strings(key("command"), r.Command, &c.Command):
	case len(c.Command) == 0:
		l.add(key("command"), "must not be empty: the program's absolute path, then its arguments")
	case !filepath.IsAbs(c.Command[0]):
		l.add(key("command"), "%q must be an absolute path: the command runs without a shell and without a search path", c.Command[0])
	default:
		// The command runs inside the daemon's unit: a program under a
		// directory its sandbox hides would fail at every tick.
		if h, hidden := hiddenBy(filepath.Clean(c.Command[0])); hidden {
			l.add(key("command"), "%s is invisible to the daemon, which runs the command: %s; install it elsewhere, e.g. under /usr/local/bin",
				c.Command[0], fmt.Sprintf(h.reason, h.dir))
		}
	}
	c.TimeoutSec = DefaultCommandTimeoutSec
	if l.number(key("timeout_sec"), r.TimeoutSec, &c.TimeoutSec) && c.TimeoutSec <= 0 {
		l.add(key("timeout_sec"), "must be > 0")
		c.TimeoutSec = DefaultCommandTimeoutSec
	}
}
