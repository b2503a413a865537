// Package wake holds the connections that arrive at a service pool's wake
// address while the pool idles at zero replicas, wakes the pool, and
// forwards each held connection to the first ready replica byte for byte:
// issue 29 ("Scale a service to zero and wake it on its first request").
//
// It is the core of the wake address's process and depends on neither the
// controller nor the configuration. systemd holds the listening socket (a
// .socket unit with Accept=no; SystemdListener takes it from LISTEN_FDS), so
// that connections queue in the kernel while nothing runs; the process is
// started by the first connection and leaves (Serve returns ErrIdle) after
// Config.IdleExit with no connection in hand, giving the socket back to
// systemd: nothing of the wake path stays in the data path.
//
// A Holder asks its Waker to wake the pool (Wake) and learns the ready
// replicas' addresses by polling (Ready), or at once when the Waker also
// implements Notifier. In production the Waker will be the daemon's
// control socket (docs/wake.md). Bytes are never consumed without being
// replayed: a held connection is forwarded unread (splice on Linux), and
// the few bytes read to tell an HTTP/1.x request from another protocol are
// written to the replica first.
//
// Bounds: past Config.HoldTimeout a held HTTP/1.x request is answered 503
// with Retry-After, and any other protocol is closed; ModeReject answers so
// at once while still waking the pool. A replica that refuses is skipped
// for the next one; when every one refuses, the connection is held again
// until the hold ends.
package wake
