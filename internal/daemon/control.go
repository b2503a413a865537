package daemon

// The control protocol between the daemon and the `flexiq-scaled reload`
// and `flexiq-scaled roll` commands.
//
// systemd 252 has no Type=notify-reload, and `ExecReload=/bin/kill -HUP`
// returns before the daemon has even read the file, so a rejected reload
// could only be seen in the journal. Instead, a command that asks the daemon
// for something:
//
//  1. writes a request file, request.NONCE, into the daemon's runtime
//     directory (/run/flexiq-scaled), atomically (a temporary file renamed
//     into place), NONCE being 128 random bits;
//  2. signals the daemon: SIGHUP for a reload, SIGUSR1 for a roll;
//  3. waits, bounded, for verdict.NONCE, which the daemon writes (again by
//     rename) once it has acted, and which carries the same nonce inside.
//
// The daemon reads every pending request of the signal's kind *before* it
// acts, and answers each. A request written after that read comes with its
// own signal, so it is answered by a later pass: every reload request is
// answered by a reload that read the file after the request was made, and
// signals that coalesce lose no request. A plain `kill -HUP` (no request)
// still reloads, and answers no one.
//
// Nothing in the files is trusted beyond its own request: the directory
// belongs to root (RuntimeDirectory=), requests older than requestTTL are
// dropped unanswered (their asker has given up, and a roll must not happen
// minutes later, after a restart of the daemon), and verdicts nobody
// collected are removed after the same time.

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/atomicfile"
)

// Operations a request may ask for, and the signal that announces each.
const (
	OpReload = "reload"
	OpRoll   = "roll"
)

// SignalFor is the signal that announces a request of op.
func SignalFor(op string) syscall.Signal {
	if op == OpRoll {
		return syscall.SIGUSR1
	}
	return syscall.SIGHUP
}

// DefaultWait bounds how long a command waits for its verdict: below
// systemd's default TimeoutStartSec (90 s), which also bounds ExecReload=.
const DefaultWait = 60 * time.Second

// requestTTL is how old a request or an uncollected verdict may get before
// the daemon drops it. Longer than any asker waits.
const requestTTL = 2 * DefaultWait

const (
	requestPrefix = "request."
	verdictPrefix = "verdict."
	// PIDFile holds the running daemon's PID. Only a daemon that speaks
	// this protocol writes it, so `roll` never sends SIGUSR1 (which would
	// kill it) to one that does not.
	PIDFile = "daemon.pid"
)

// Request is one command's request to the daemon.
type Request struct {
	Nonce  string   `json:"nonce"`
	Op     string   `json:"op"`
	Pools  []string `json:"pools,omitempty"`  // roll: the pools to roll
	Reason string   `json:"reason,omitempty"` // roll: why, for the journal
}

// Verdict is the daemon's answer to one request.
type Verdict struct {
	Nonce string `json:"nonce"`
	OK    bool   `json:"ok"`
	// Problems say why a request was refused (one "FILE: KEY: MESSAGE"
	// each for a rejected configuration).
	Problems []string `json:"problems,omitempty"`
	// Changes say what was done, one line each.
	Changes []string `json:"changes,omitempty"`
}

// RuntimeDir is the daemon's runtime directory: $RUNTIME_DIRECTORY when
// systemd set it (RuntimeDirectory=, for ExecStart= and ExecReload= alike),
// else /run/flexiq-scaled, or $XDG_RUNTIME_DIR/flexiq-scaled for the user's
// service manager.
func RuntimeDir(user bool) string {
	return serviceDir("RUNTIME_DIRECTORY", user, "XDG_RUNTIME_DIR", "/run/user/"+strconv.Itoa(os.Getuid()), "/run")
}

// serviceDir is the daemon's directory of one kind: what systemd set in env
// (RuntimeDirectory=, StateDirectory=, ...), else flexiq-scaled under the
// system's base, or under $userEnv (userDefault if unset) for the user's
// service manager.
func serviceDir(env string, user bool, userEnv, userDefault, system string) string {
	if d := os.Getenv(env); d != "" {
		// Several entries of the directive are joined with ':'.
		d, _, _ = strings.Cut(d, ":")
		return d
	}
	if user {
		base := os.Getenv(userEnv)
		if base == "" {
			base = userDefault
		}
		return filepath.Join(base, "flexiq-scaled")
	}
	return filepath.Join(system, "flexiq-scaled")
}

// writeAtomic writes data to dir/name: a reader sees the whole file or none.
func writeAtomic(dir, name string, data []byte) error {
	return atomicfile.Write(filepath.Join(dir, name), data)
}

func newNonce() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// validNonce keeps file names derived from a nonce inside the directory.
func validNonce(n string) bool {
	if len(n) != 32 {
		return false
	}
	_, err := hex.DecodeString(n)
	return err == nil
}

// Client asks the daemon for something and waits for its verdict.
type Client struct {
	Dir string
	// Signal announces a request to the daemon (in production, kill(2)
	// of its PID with SignalFor(op)).
	Signal func(syscall.Signal) error
	// Wait bounds the wait for the verdict; DefaultWait if zero.
	Wait time.Duration
	// Poll is the interval at which the verdict is looked for.
	Poll time.Duration
}

// ErrNoVerdict is returned when the daemon did not answer in time.
var ErrNoVerdict = errors.New("no verdict from the daemon")

// Ask sends req (its Nonce is filled in) and returns the daemon's verdict
// for this very request. A verdict for any other request is never taken for
// it. On timeout the request is withdrawn, so that the daemon does not act
// on it later.
func (c *Client) Ask(req Request) (Verdict, error) {
	wait, poll := c.Wait, c.Poll
	if wait <= 0 {
		wait = DefaultWait
	}
	if poll <= 0 {
		poll = 50 * time.Millisecond
	}
	nonce, err := newNonce()
	if err != nil {
		return Verdict{}, err
	}
	req.Nonce = nonce
	data, err := json.Marshal(req)
	if err != nil {
		return Verdict{}, err
	}
	reqPath := filepath.Join(c.Dir, requestPrefix+nonce)
	verdictPath := filepath.Join(c.Dir, verdictPrefix+nonce)
	if err := writeAtomic(c.Dir, requestPrefix+nonce, data); err != nil {
		return Verdict{}, err
	}
	if err := c.Signal(SignalFor(req.Op)); err != nil {
		os.Remove(reqPath)
		return Verdict{}, err
	}
	deadline := time.Now().Add(wait)
	for {
		if b, err := os.ReadFile(verdictPath); err == nil {
			var v Verdict
			// A verdict that is not for this nonce (it cannot be
			// ours, whatever its name) is ignored.
			if json.Unmarshal(b, &v) == nil && v.Nonce == nonce {
				os.Remove(verdictPath)
				return v, nil
			}
		}
		if time.Now().After(deadline) {
			os.Remove(reqPath)
			return Verdict{}, fmt.Errorf("%w within %s (request %s in %s)", ErrNoVerdict, wait, nonce, c.Dir)
		}
		time.Sleep(poll)
	}
}

// control is the daemon's side of the protocol.
type control struct {
	dir string
	now func() time.Time
	// logf reports requests that cannot be read or answered.
	logf func(format string, args ...any)
}

// pending returns the requests of op waiting for an answer, oldest first,
// and drops those too old to matter and those that cannot be read. It also
// removes verdicts that nobody collected.
func (c *control) pending(op string) []Request {
	entries, err := os.ReadDir(c.dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			c.logf("cannot read requests in %s: %v", c.dir, err)
		}
		return nil
	}
	now := c.now()
	type dated struct {
		r  Request
		at time.Time
	}
	var out []dated
	for _, e := range entries {
		name := e.Name()
		isReq, isVerdict := strings.HasPrefix(name, requestPrefix), strings.HasPrefix(name, verdictPrefix)
		if !isReq && !isVerdict && !strings.HasPrefix(name, atomicfile.TempPrefix) {
			continue
		}
		path := filepath.Join(c.dir, name)
		info, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		if now.Sub(info.ModTime()) > requestTTL {
			os.Remove(path)
			continue
		}
		if !isReq {
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		var r Request
		if err := json.Unmarshal(b, &r); err != nil || r.Nonce != strings.TrimPrefix(name, requestPrefix) || !validNonce(r.Nonce) {
			c.logf("ignoring malformed request %s", path)
			os.Remove(path)
			continue
		}
		if r.Op != op {
			continue
		}
		out = append(out, dated{r, info.ModTime()})
	}
	slices.SortFunc(out, func(a, b dated) int { return a.at.Compare(b.at) })
	reqs := make([]Request, 0, len(out))
	for _, d := range out {
		reqs = append(reqs, d.r)
	}
	return reqs
}

// answer writes the verdict for a request and removes the request.
func (c *control) answer(r Request, v Verdict) {
	v.Nonce = r.Nonce
	data, err := json.Marshal(v)
	if err == nil {
		err = writeAtomic(c.dir, verdictPrefix+r.Nonce, data)
	}
	if err != nil {
		c.logf("cannot answer request %s: %v", r.Nonce, err)
	}
	os.Remove(filepath.Join(c.dir, requestPrefix+r.Nonce))
}
