// Command flexiq-sandbox boots and drives throwaway systemd sandboxes for the
// end-to-end tests:
//
//	flexiq-sandbox start NAME [--bind DIR]... [--owner-pid PID]
//	flexiq-sandbox exec NAME -- CMD...
//	flexiq-sandbox status NAME
//	flexiq-sandbox stop NAME
//	flexiq-sandbox list
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/flexiq/flexiq-scaled/test/sandbox"
)

const usage = `usage:
  flexiq-sandbox start NAME [--bind DIR]... [--owner-pid PID] [--timeout 90s]
  flexiq-sandbox exec NAME -- CMD...
  flexiq-sandbox status NAME
  flexiq-sandbox stop NAME
  flexiq-sandbox list`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1], os.Args[2:]); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			os.Exit(exit.ExitCode())
		}
		fmt.Fprintln(os.Stderr, "flexiq-sandbox:", err)
		os.Exit(1)
	}
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func run(ctx context.Context, verb string, args []string) error {
	if verb == "list" {
		for _, n := range sandbox.List() {
			fmt.Println(n)
		}
		return nil
	}
	if len(args) < 1 {
		return errors.New(usage)
	}
	name, rest := args[0], args[1:]
	switch verb {
	case "start":
		fs := flag.NewFlagSet("start", flag.ContinueOnError)
		var binds multiFlag
		fs.Var(&binds, "bind", "host directory to mount read-write at the same path inside (repeatable)")
		owner := fs.Int("owner-pid", 0, "stop the sandbox when this process exits")
		timeout := fs.Duration("timeout", 90*time.Second, "how long to wait for boot")
		if err := fs.Parse(rest); err != nil {
			return err
		}
		t0 := time.Now()
		sb, err := sandbox.Start(ctx, sandbox.Options{Name: name, Binds: binds, OwnerPID: *owner, BootTimeout: *timeout})
		if err != nil {
			return err
		}
		printStatus(sb)
		fmt.Printf("boot_seconds=%.2f\n", time.Since(t0).Seconds())
		if len(sb.FailedUnits) > 0 {
			fmt.Fprintf(os.Stderr, "warning: sandbox %s booted degraded; failed units: %s\n", name, strings.Join(sb.FailedUnits, " "))
		}
		return nil
	case "exec":
		if len(rest) > 0 && rest[0] == "--" {
			rest = rest[1:]
		}
		if len(rest) == 0 {
			return errors.New("exec: no command; usage: flexiq-sandbox exec NAME -- CMD...")
		}
		sb, err := sandbox.Attach(name)
		if err != nil {
			return err
		}
		cmd := sb.Command(ctx, rest...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		return cmd.Run()
	case "status":
		sb, err := sandbox.Attach(name)
		if err != nil {
			return err
		}
		state, _ := sb.Command(ctx, "systemctl", "is-system-running").Output()
		sb.SystemState = strings.TrimSpace(string(state))
		printStatus(sb)
		return nil
	case "stop":
		sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		return sandbox.Stop(sctx, name)
	}
	return fmt.Errorf("unknown command %q\n%s", verb, usage)
}

func printStatus(sb *sandbox.Sandbox) {
	fmt.Printf("name=%s\npid=%d\nbus=%s\nstate=%s\ncgroup=%s\n", sb.Name, sb.PID, sb.BusAddress, sb.SystemState, sb.Cgroup)
}
