package wake

import (
	"fmt"
	"net"
	"os"

	"github.com/coreos/go-systemd/v22/activation"
)

// SystemdListener returns the one listening socket systemd passed to this
// process (LISTEN_FDS, socket activation with Accept=no), and clears the
// variables so that no child inherits them.
func SystemdListener() (net.Listener, error) {
	fds, names := os.Getenv("LISTEN_FDS"), os.Getenv("LISTEN_FDNAMES")
	if fds == "" {
		return nil, fmt.Errorf("no socket passed by systemd (LISTEN_FDS unset): the wake address's process is started by its .socket unit")
	}
	ls, err := activation.Listeners()
	if err != nil {
		return nil, fmt.Errorf("sockets passed by systemd: %w", err)
	}
	var got []net.Listener
	for _, l := range ls {
		if l != nil {
			got = append(got, l)
		}
	}
	if len(got) != 1 || len(ls) != 1 {
		for _, l := range got {
			_ = l.Close()
		}
		return nil, fmt.Errorf("systemd passed %d descriptors (LISTEN_FDS=%s, LISTEN_FDNAMES=%q), %d of them listening stream sockets: want exactly one", len(ls), fds, names, len(got))
	}
	return got[0], nil
}
