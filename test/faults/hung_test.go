package faults

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"
)

// hangPort is where the hung "Prometheus" listens, inside the sandbox.
const hangPort = 9599

// startHang starts a listener that never accepts: a connection to it opens
// (in the kernel's backlog) and the request is sent, but no answer ever
// comes, so a source read of it hangs for its whole timeout.
func (e *env) startHang() {
	e.T.Helper()
	e.Sh(fmt.Sprintf(`systemd-run --quiet --unit flexiq-hang /usr/bin/python3 -c 'import socket, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", %d))
s.listen(64)
time.sleep(86400)'
for i in $(seq 50); do ss -Htln "( sport = :%d )" | grep -q . && exit 0; sleep 0.1; done
echo "the hung listener is not listening" >&2; exit 1`, hangPort, hangPort))
}

// hangReads follows the daemon's connections to the hung listener: one
// open is a source read in flight.
type hangReads struct {
	e    *env
	seen map[string]time.Time // by the daemon's local address: when first seen
}

// youngest is the age of the newest read in flight, as far as the test has
// seen it; ok is false when none is.
func (h *hangReads) youngest() (age time.Duration, ok bool) {
	out, _ := h.e.Try("ss", "-Htn", "state", "established", fmt.Sprintf("( dport = :%d )", hangPort))
	now := time.Now()
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		first, known := h.seen[f[2]]
		if !known {
			first = now
			h.seen[f[2]] = first
		}
		if a := now.Sub(first); !ok || a < age {
			age, ok = a, true
		}
	}
	return age, ok
}

// waitFresh waits until a source read has been hanging for at most fresh,
// so that what follows meets it with most of its 30 s still to hang.
func (h *hangReads) waitFresh(fresh time.Duration) {
	h.e.T.Helper()
	h.e.Eventually(75*time.Second, "a fresh read of the hung source in flight", func() (bool, string) {
		age, ok := h.youngest()
		return ok && age <= fresh, fmt.Sprintf("in flight %v, youngest %s", ok, age)
	})
}

// median of durations, for the FIGURE line.
func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// A source whose read hangs for its whole timeout (30 s, the longest): the
// operator's pause, pin, status and unpin answer at once, as they must
// when a queue's server hangs, and a reload that fixes the source takes
// effect at once, without waiting the hung read out. The commands are the
// real CLI against the real daemon; the bound asserted is loose for a noisy
// machine (the aim is 200 ms), and far below what waiting for the read
// would take.
func TestHungSourceRead(t *testing.T) {
	e := setup(t, "hung-source-read")
	const bound = 3 * time.Second
	e.startHang()
	pool := func(maxWorkers int) string {
		return fmt.Sprintf(`
[pools.hang]
exec = ["/bin/sleep", "infinity"]
poll_interval_sec = 30
min_workers = 0
max_workers = %d
target_queue_depth_per_worker = 1
threads_per_worker = 1
target_utilisation = 1.0
[pools.hang.source]
type = "prometheus"
url = "http://127.0.0.1:%d"
pending_query = "sum(queue_waiting)"
`, maxWorkers, hangPort)
	}
	e.Configure(pool(4))
	e.StartDaemon()
	// A reload ticks at once: no waiting out the first 30 s interval.
	e.Configure(pool(5))
	e.Reload()
	reads := &hangReads{e: e, seen: map[string]time.Time{}}

	var took []time.Duration
	run := func(what string, argv ...string) string {
		t.Helper()
		reads.waitFresh(5 * time.Second)
		t0 := time.Now()
		out, err := e.Try(append([]string{"flexiq-scaled"}, argv...)...)
		d := time.Since(t0)
		took = append(took, d)
		_, inFlight := reads.youngest()
		t.Logf("%s answered in %s (a read still in flight after it: %v)", what, d.Round(time.Millisecond), inFlight)
		if err != nil {
			e.Errorf("%s: %v", what, err)
		}
		if d > bound {
			e.Errorf("%s took %s while the source read hung, want under %s", what, d.Round(time.Millisecond), bound)
		}
		return out
	}
	// What a command costs with no daemon in the way: the sandbox's exec.
	t0 := time.Now()
	e.Try("flexiq-scaled", "--help")
	base := time.Since(t0)

	run("pause", "pause", "hang")
	run("pin", "pin", "hang", "2")
	if out := run("status", "status", "hang"); !strings.Contains(out, "pin") {
		e.Errorf("status after the pin does not show it:\n%s", out)
	}
	run("unpin", "unpin", "hang")

	// The fix: the same pool on the demand table, asking for 3 workers.
	reads.waitFresh(5 * time.Second)
	e.setDemand(3, 0)
	e.Configure(e.demandPool("hang", "min_workers = 0\nmax_workers = 5\npoll_interval_sec = 30\n"))
	t1 := time.Now()
	e.Reload()
	reload := time.Since(t1)
	e.waitLive("hang", 3, 10*time.Second)
	fixed := time.Since(t1)
	t.Logf("reload answered in %s; the fixed source's 3 workers live %s after it began", reload.Round(time.Millisecond), fixed.Round(time.Millisecond))
	e.figure("hang", 30*time.Second, "exec_baseline", base, "pause", took[0], "pin", took[1], "status", took[2], "unpin", took[3],
		"median", median(took), "reload", reload, "fixed_source_scaled_after", fixed)
}
