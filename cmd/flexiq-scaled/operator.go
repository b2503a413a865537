package main

// The operator's commands, which speak to the daemon's control socket
// (internal/control): status (status.go), explain (explain.go), pause,
// resume, pin, unpin (override.go). This file holds what they share: how
// they find the socket, read their arguments and report a failure.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"github.com/flexiq/flexiq-scaled/internal/control"
	"github.com/flexiq/flexiq-scaled/internal/daemon"
)

// socketFlags find the control socket.
type socketFlags struct {
	socket *string
	user   *bool
}

func addSocketFlags(fs *flag.FlagSet) socketFlags {
	return socketFlags{
		socket: fs.String("socket", "", "the daemon's control `SOCKET` (default: root.sock, which answers root alone, else control.sock, in /run/flexiq-scaled, or $XDG_RUNTIME_DIR/flexiq-scaled with --user)"),
		user:   fs.Bool("user", false, "the daemon runs under the user's service manager (run --user)"),
	}
}

func (f socketFlags) client() *control.Client {
	return socketClient(*f.socket, daemon.RuntimeDir(*f.user))
}

// socketClient is the client for the socket the flags name, or else for
// the daemon's sockets in its runtime directory dir: root.sock first, which
// answers root (or a --user daemon's user) whatever other users do to
// control.sock, then control.sock.
func socketClient(socket, dir string) *control.Client {
	if socket != "" {
		return &control.Client{Socket: socket}
	}
	return &control.Client{Socket: filepath.Join(dir, control.SocketName), Root: filepath.Join(dir, control.RootSocketName)}
}

// parseArgs parses flags and positional arguments in any order, as
// `pause email --for 10m` is written.
func parseArgs(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (pos []string, code int, done bool) {
	for {
		if code, done := parseFlags(fs, args, stdout, stderr); done {
			return nil, code, true
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, exitOK, false
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), exitOK, false
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// controlFailed reports a failed request in one line: the daemon not
// running, a permission refused, or the daemon's own message.
func controlFailed(stderr io.Writer, name string, err error) int {
	if errors.Is(err, control.ErrNotRunning) {
		fmt.Fprintf(stderr, "%s %s: %v\n", prog, name, err)
		return exitFail
	}
	return failf(stderr, name, "%v", err)
}
