// Command flexiq-scaled is the systemd-native autoscaling supervisor for
// flexiq workers. This package is only the command line: each subcommand
// parses its flags and hands over to an internal package, so that everything
// worth testing is testable without a process.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/flexiq/flexiq-scaled/internal/version"
)

// Exit codes. 2 for a command line that cannot be acted on, as flag and most
// Unix tools do, so that scripts can tell "you called me wrong" from "what you
// asked for failed".
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

const prog = "flexiq-scaled"

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

// commands are listed in this order by help.
var commands []command

func init() {
	// Assigned in init because help refers back to the table.
	commands = []command{
		{"run", "run the daemon (what the systemd unit starts)", cmdRun},
		{"check-config", "validate a config file and print it with every default filled in", cmdCheckConfig},
		{"reload", "make the running daemon re-read its config, and report its verdict", cmdReload},
		{"roll", "make the running daemon replace every worker of a pool, one at a time", cmdRoll},
		{"status", "show what each pool is doing: workers, queue, source, last decision, mode", cmdStatus},
		{"explain", "show a pool's last decisions, step by step, and what held it back", cmdExplain},
		{"pause", "stop a pool's scaling (crashed workers are still replaced)", cmdPause},
		{"resume", "end a pause", cmdResume},
		{"pin", "hold a pool at exactly N workers", cmdPin},
		{"unpin", "end a pin", cmdUnpin},
		{"pool", "add a pool as a drop-in with flexiq autoscale's flags, or remove one", cmdPool},
		{"history", "chart a pool's decisions from the journal, or print them as CSV", cmdHistory},
		{"observe", "read a pool's queue once and print what the daemon would see", cmdObserve},
		{"simulate", "replay a queue trace through a pool's scaling policy", cmdSimulate},
		{"version", "print the version", cmdVersion},
		{"help", "show this help, or a subcommand's", cmdHelp},
	}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches args (without the program name) to a subcommand and returns
// the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help":
		usage(stdout)
		return exitOK
	case "-version", "--version":
		return cmdVersion(nil, stdout, stderr)
	case "wake":
		// Hidden: the process of a pool's wake address (wake.go).
		return cmdWake(args[1:], stdout, stderr)
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "%s: unknown command %q\n\n", prog, args[0])
	usage(stderr)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "usage: %s COMMAND [ARGS]\n\n", prog)
	fmt.Fprintf(w, "%s sizes pools of flexiq workers, each worker a transient systemd unit.\n\ncommands:\n", prog)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-13s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nRun '%s COMMAND --help' for a command's arguments.\n", prog)
}

func cmdHelp(args []string, stdout, stderr io.Writer) int {
	switch len(args) {
	case 0:
		usage(stdout)
		return exitOK
	case 1:
		if args[0] == "help" {
			usage(stdout)
			return exitOK
		}
		for _, c := range commands {
			if c.name == args[0] {
				return c.run([]string{"--help"}, stdout, stderr)
			}
		}
		fmt.Fprintf(stderr, "%s help: unknown command %q\n\n", prog, args[0])
	}
	usage(stderr)
	return exitUsage
}

func cmdVersion(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("version", "", "Print the version, the Go toolchain and the platform.")
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(fs, stderr, "unexpected argument %q", fs.Arg(0))
	}
	fmt.Fprintln(stdout, version.String())
	return exitOK
}

// newFlagSet returns a FlagSet for a subcommand whose usage text is the
// synopsis (the arguments after the subcommand's name), the description and
// the flags. Errors are returned, never acted on: exiting is run's business.
func newFlagSet(name, synopsis, description string) *flag.FlagSet {
	fs := flag.NewFlagSet(prog+" "+name, flag.ContinueOnError)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage: %s %s", prog, name)
		if synopsis != "" {
			fmt.Fprintf(w, " %s", synopsis)
		}
		fmt.Fprintf(w, "\n\n%s\n", strings.TrimSpace(description))
		hasFlags := false
		fs.VisitAll(func(*flag.Flag) { hasFlags = true })
		if hasFlags {
			fmt.Fprintln(w, "\nflags:")
			fs.PrintDefaults()
		}
	}
	return fs
}

// parseFlags parses args into fs. When done is true the caller returns code
// at once: --help printed the usage to stdout (0), or a bad flag printed the
// error and the usage to stderr (2).
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (code int, done bool) {
	// Parse prints its error and then calls Usage, both on Output; help
	// is asked for, so it goes to stdout, which Parse cannot know in
	// advance. Silence Usage during Parse and print it afterwards.
	fs.SetOutput(stderr)
	printUsage := fs.Usage
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.Usage = printUsage
	switch {
	case err == nil:
		return exitOK, false
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stdout)
		fs.Usage()
		fs.SetOutput(stderr)
		return exitOK, true
	default:
		fmt.Fprintln(stderr)
		fs.Usage()
		return exitUsage, true
	}
}

// usageError reports a command line that parsed but makes no sense, followed
// by the usage, and returns the usage exit code.
func usageError(fs *flag.FlagSet, stderr io.Writer, format string, args ...any) int {
	fmt.Fprintf(stderr, "%s: %s\n\n", fs.Name(), fmt.Sprintf(format, args...))
	fs.SetOutput(stderr)
	fs.Usage()
	return exitUsage
}

// failf reports a failure of the command itself (not of its command line)
// and returns the failure exit code.
func failf(stderr io.Writer, name, format string, args ...any) int {
	fmt.Fprintf(stderr, "%s %s: %s\n", prog, name, fmt.Sprintf(format, args...))
	return exitFail
}
