package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// WriteFile writes a root-owned file inside the sandbox, through its root as
// the host sees it, creating the directory if needed.
func (s *Sandbox) WriteFile(path, content string) error {
	host := fmt.Sprintf("/proc/%d/root%s", s.PID, path)
	if err := os.MkdirAll(filepath.Dir(host), 0o755); err != nil {
		return err
	}
	return os.WriteFile(host, []byte(content), 0o644)
}

// Sh runs a shell script (sh -e) inside the sandbox and returns its output;
// a failure fails t, with the output.
func (s *Sandbox) Sh(t testing.TB, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := s.Exec(ctx, "sh", "-ec", script)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Eventually polls cond every 200 ms until it holds, for at most within. It
// reports whether it held, and the state cond last described, for the
// caller's failure message.
func Eventually(within time.Duration, cond func() (ok bool, state string)) (bool, string) {
	return Poll(within, 200*time.Millisecond, cond)
}

// Poll is Eventually, checking every so often.
func Poll(within, every time.Duration, cond func() (ok bool, state string)) (bool, string) {
	deadline := time.Now().Add(within)
	for {
		ok, state := cond()
		if ok || time.Now().After(deadline) {
			return ok, state
		}
		time.Sleep(every)
	}
}

// HostPIDs maps the PIDs of the sandbox's processes, as the sandbox numbers
// them, to the host's, where a test can signal them or open pidfds: from
// the NSpid lines of the host's /proc/*/status, for the processes in the
// sandbox's PID namespace.
func (s *Sandbox) HostPIDs() map[int]int {
	ns, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", s.PID))
	hosts := map[int]int{}
	ents, _ := os.ReadDir("/proc")
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid)); l != ns {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if f, ok := strings.CutPrefix(line, "NSpid:"); ok {
				ids := strings.Fields(f)
				if inner, err := strconv.Atoi(ids[len(ids)-1]); err == nil {
					hosts[inner] = pid
				}
			}
		}
	}
	return hosts
}

// splitBind splits "HOST[:INSIDE]"; without INSIDE the path is the same.
func splitBind(b string) (src, dst string) {
	if src, dst, ok := strings.Cut(b, ":"); ok {
		return src, dst
	}
	return b, b
}

func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
