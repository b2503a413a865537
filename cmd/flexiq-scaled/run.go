package main

import (
	"context"
	"io"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/daemon"
)

func cmdRun(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("run", "[--config FILE] [--user]", `
Run the daemon in the foreground: load the config, connect to systemd over
D-Bus, and size every pool until stopped. SIGHUP reloads the config.
This is what flexiq-scaled.service starts (Type=notify); it is not meant to
be started by hand on a production host.`)
	configPath := fs.String("config", config.DefaultPath, "configuration `FILE`")
	user := fs.Bool("user", false, "manage workers through the calling user's service manager (systemctl --user) instead of the system one")
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(fs, stderr, "unexpected argument %q (the config file is given with --config)", fs.Arg(0))
	}
	// The daemon installs its own signal handling (SIGHUP reloads, SIGTERM
	// stops), so it gets a context that nothing here cancels.
	return daemon.Run(context.Background(), daemon.Options{ConfigPath: *configPath, User: *user})
}
