package discovery

import (
	"fmt"
	"path/filepath"
	"slices"
	"time"
)

// DefaultCommandTimeout bounds an after-change command whose config gives
// no timeout: a reload that hangs must not hold a replica's drain forever.
const DefaultCommandTimeout = 30 * time.Second

// Command is an after-change command: an absolute program path, its
// arguments (no shell, no expansion) and a timeout. It is run, as a
// transient unit through internal/units, by the caller, not here.
type Command struct {
	Path    string
	Args    []string
	Timeout time.Duration
}

// NewCommand builds a Command from a config's argv and timeout (0 means
// DefaultCommandTimeout) and validates it; key names the config key.
func NewCommand(key string, argv []string, timeout time.Duration) (Command, error) {
	if len(argv) == 0 {
		return Command{}, fmt.Errorf("%s: empty command", key)
	}
	if timeout == 0 {
		timeout = DefaultCommandTimeout
	}
	c := Command{Path: argv[0], Args: slices.Clone(argv[1:]), Timeout: timeout}
	return c, c.Validate(key)
}

// Validate refuses a program that is not an absolute path (the daemon
// runs it without a shell or $PATH search, so "systemctl" alone would be
// a surprise) and a timeout that is not positive.
func (c Command) Validate(key string) error {
	if c.Path == "" {
		return fmt.Errorf("%s: empty command", key)
	}
	if !filepath.IsAbs(c.Path) {
		return fmt.Errorf("%s: %q is not an absolute path", key, c.Path)
	}
	if c.Timeout <= 0 {
		return fmt.Errorf("%s: timeout %v is not positive", key, c.Timeout)
	}
	return nil
}

// Argv is the program and its arguments, as internal/units'
// CommandRunner.RunCommand takes them.
func (c Command) Argv() []string {
	return append([]string{c.Path}, c.Args...)
}

func (c Command) equal(o Command) bool {
	return c.Path == o.Path && slices.Equal(c.Args, o.Args) && c.Timeout == o.Timeout
}
