package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/flexiqdb"
	"github.com/flexiq/flexiq-scaled/test/sandbox"
)

const (
	poolName   = "demo"
	daemonUnit = "flexiq-scaled.service"
	// workerBin is where the test worker is installed inside the sandbox.
	workerBin = "/usr/local/bin/flexiq-testworker"
	// configPath is the packaged daemon's configuration file.
	configPath = "/etc/flexiq-scaled/config.toml"
)

// poolSettings are the demo pool's scaling knobs.
type poolSettings struct {
	MinWorkers, MaxWorkers int
	Threads                int
	QueueDepth             float64
	ScaleDownWindow        time.Duration
}

// demo is one run: the sandbox, the database and what the timeline saw.
type demo struct {
	s     settings
	root  string // the checkout, bind-mounted at the same path in the sandbox
	trace []arrival
	start time.Time
	out   io.Writer

	sb     *sandbox.Sandbox
	dbPath string
	// daemonVersion is what the installed daemon says it is.
	daemonVersion string
}

// logf prints a progress line stamped with the time since the demo started.
func (d *demo) logf(format string, args ...any) {
	fmt.Fprintf(d.out, "[%5.1fs] %s\n", time.Since(d.start).Seconds(), fmt.Sprintf(format, args...))
}

// header says what is about to be replayed and how, including the trace's
// licence attribution, which CC-BY 4.0 requires wherever the data are used.
func (d *demo) header() {
	r, p, t := d.s.replay, d.s.pool, d.trace
	first, last := t[0].At, t[len(t)-1].At
	var svc []int
	for _, a := range t {
		svc = append(svc, r.ServiceMs(a))
	}
	fmt.Fprintln(d.out, "flexiq-scaled demo: the .deb in a throwaway systemd, scaling workers for a real job trace")
	fmt.Fprintln(d.out, Attribution)
	fmt.Fprintf(d.out, "  window    %s to %s UTC: %d jobs in %s of trace time\n",
		first.Format("2006-01-02 15:04:05"), last.Format("15:04:05"), len(t), last.Sub(first).Round(time.Second))
	fmt.Fprintf(d.out, "  replay    %gx faster: %s of wall time, after %s with no arrivals\n",
		r.Speedup, r.Duration(t).Round(time.Second)-r.LeadIn, r.LeadIn)
	fmt.Fprintf(d.out, "  job size  %g ms + %g ms per generated token, also %gx faster: median %d ms, p95 %d ms, max %d ms of wall time\n",
		r.BaseMs, r.PerTokenMs, r.Speedup, percentile(svc, 0.5), percentile(svc, 0.95), percentile(svc, 1))
	fmt.Fprintf(d.out, "  pool      %q: %d..%d test workers x %d threads, target %g pending per worker, scale-down window %s, poll 1s\n",
		poolName, p.MinWorkers, p.MaxWorkers, p.Threads, p.QueueDepth, p.ScaleDownWindow)
	fmt.Fprintln(d.out)
}

// run does everything between the header and the teardown. It returns what
// the replay measured, if it got that far.
func (d *demo) run(ctx context.Context) (*result, error) {
	if err := d.build(ctx); err != nil {
		return nil, err
	}
	db, err := d.createDB()
	if err != nil {
		return nil, err
	}
	defer db.Close()

	pid := os.Getpid()
	d.logf("booting a systemd sandbox (its own namespaces, on an overlay of /)")
	// OwnerPID ties the sandbox to this process: however the demo dies, the
	// keeper powers the sandbox off.
	d.sb, err = sandbox.Start(ctx, sandbox.Options{
		Name: fmt.Sprintf("demo-%d", pid),
		// The database's directory appears under /var/lib inside, as on a
		// real host: the packaged unit hides /tmp and /home (where a
		// checkout may be) from the daemon.
		Binds:    []string{d.root, filepath.Dir(d.dbPath) + ":" + dbDirInside},
		OwnerPID: pid,
	})
	if err != nil {
		return nil, err
	}
	d.logf("sandbox %s is up: systemd %s, pid %d on this host", d.sb.Name, d.sb.SystemState, d.sb.PID)

	if err := d.install(ctx); err != nil {
		return nil, err
	}
	if err := d.configure(ctx); err != nil {
		return nil, err
	}
	res, err := d.replay(ctx, db)
	if err == nil {
		err = d.historyPicture(ctx)
	}
	return res, err
}

// historyPicture draws the demo's history from the sandbox's journal with
// the packaged binary (flexiq-scaled history --svg) into docs/, which the
// README shows.
func (d *demo) historyPicture(ctx context.Context) error {
	const inside = "/var/tmp/demo-history.svg"
	if _, err := d.sb.Exec(ctx, "flexiq-scaled", "history", poolName, "--since", fmt.Sprintf("@%d", d.start.Unix()), "--svg", inside); err != nil {
		return err
	}
	svg, err := d.sb.Command(ctx, "cat", inside).Output()
	if err != nil {
		return fmt.Errorf("reading %s: %w", inside, err)
	}
	out := filepath.Join(d.root, "docs", "demo-history.svg")
	if err := os.WriteFile(out, svg, 0o644); err != nil {
		return err
	}
	d.logf("wrote %s (flexiq-scaled history %s --since @%d --svg FILE)", out, poolName, d.start.Unix())
	return nil
}

// goTool finds the go command: $GO (make passes its own), then PATH, then
// the usual install location.
func goTool() string {
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	if g, err := exec.LookPath("go"); err == nil {
		return g
	}
	return "/usr/local/go/bin/go"
}

// build compiles the test worker (the pool's worker command) and, when no
// .deb is given, the daemon for the by-hand install. Both go to bin/, which
// the sandbox sees at the same path.
func (d *demo) build(ctx context.Context) error {
	targets := [][2]string{{"./test/worker", "bin/flexiq-testworker"}}
	if d.s.deb == "" {
		targets = append(targets, [2]string{"./cmd/flexiq-scaled", "bin/flexiq-scaled"})
	}
	for _, t := range targets {
		args := []string{"build", "-o", t[1]}
		if t[0] == "./cmd/flexiq-scaled" {
			if v, err := os.ReadFile(filepath.Join(d.root, "VERSION")); err == nil {
				args = append(args, "-ldflags", "-X github.com/flexiq/flexiq-scaled/internal/version.Version="+strings.TrimSpace(string(v)))
			}
		}
		cmd := exec.CommandContext(ctx, goTool(), append(args, t[0])...)
		// Static binaries: they run inside the sandbox whatever its libc.
		cmd.Dir, cmd.Env = d.root, append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("building %s: %v\n%s", t[0], err, out)
		}
	}
	built := make([]string, len(targets))
	for i, t := range targets {
		built[i] = t[1]
	}
	d.logf("built %s", strings.Join(built, " and "))
	return nil
}

// dbDirInside is where the sandbox sees bin/demo/, the database's directory.
const dbDirInside = "/var/lib/flexiq-demo"

// inside is a file of bin/demo/ as the sandbox sees it.
func (d *demo) inside(hostPath string) string {
	return filepath.Join(dbDirInside, filepath.Base(hostPath))
}

// createDB makes an empty flexiq database in bin/demo/, which the sandbox
// sees at dbDirInside. The demo writes it through the host's path: a path
// under /proc/PID/root would not do, because SQLite resolves that symlink and
// would open the host's own path.
func (d *demo) createDB() (*sql.DB, error) {
	dir := filepath.Join(d.root, "bin", "demo")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	d.dbPath = filepath.Join(dir, "flexiq.db")
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(d.dbPath + suffix); err != nil && !os.IsNotExist(err) {
			return nil, err
		}
	}
	return flexiqdb.Create(d.dbPath)
}

// sh runs a shell script inside the sandbox.
func (d *demo) sh(ctx context.Context, script string) (string, error) {
	return d.sb.Exec(ctx, "sh", "-ec", script)
}

// install puts the daemon in the sandbox the way an admin would: dpkg -i
// the .deb, whose maintainer scripts create the flexiq user and enable and
// start the service with the shipped no-pool configuration. Without a .deb
// it does the same steps by hand.
func (d *demo) install(ctx context.Context) error {
	if d.s.deb != "" {
		deb := d.s.deb
		// The sandbox sees only the checkout; a .deb from elsewhere is
		// copied next to the database first.
		if rel, err := filepath.Rel(d.root, deb); err != nil || strings.HasPrefix(rel, "..") {
			dst := filepath.Join(filepath.Dir(d.dbPath), filepath.Base(deb))
			if err := copyFile(deb, dst); err != nil {
				return err
			}
			deb = d.inside(dst)
		}
		out, err := d.sh(ctx, "dpkg -i "+shellQuote(deb))
		if err != nil {
			return fmt.Errorf("dpkg -i %s: %w", deb, err)
		}
		d.logf("dpkg -i %s: %s", relTo(d.root, d.s.deb), lastLine(out, "Setting up"))
	} else {
		d.logf("no --deb given: installing bin/flexiq-scaled and systemd/ by hand (make demo uses the .deb)")
		r := d.root
		_, err := d.sh(ctx, `id flexiq >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin flexiq
install -m 0755 `+r+`/bin/flexiq-scaled /usr/bin/flexiq-scaled
install -D -m 0755 `+r+`/bin/flexiq-scaled-plot /usr/libexec/flexiq-scaled/flexiq-scaled-plot
install -m 0644 `+r+`/systemd/flexiq-scaled.service `+r+`/systemd/flexiq.slice /lib/systemd/system/
install -d -m 0755 /etc/flexiq-scaled
install -m 0644 `+r+`/systemd/config.example.toml `+configPath+`
systemctl daemon-reload
systemctl enable --now `+daemonUnit)
		if err != nil {
			return err
		}
	}

	// A Type=notify unit is active only once the daemon has said READY=1.
	state, err := d.waitActive(ctx, daemonUnit, 20*time.Second)
	if err != nil {
		return err
	}
	if state == "inactive" {
		// Not ours to hide: the package should have started it.
		d.logf("note: the package left %s stopped; starting it", daemonUnit)
		if _, err := d.sh(ctx, "systemctl enable --now "+daemonUnit); err != nil {
			return err
		}
		if state, err = d.waitActive(ctx, daemonUnit, 20*time.Second); err != nil {
			return err
		}
	}
	if state != "active" {
		out, _ := d.sh(ctx, "systemctl status --no-pager "+daemonUnit+" || true; journalctl --no-pager -n 30 -u "+daemonUnit)
		return fmt.Errorf("%s is %s after install:\n%s", daemonUnit, state, out)
	}
	ver, _ := d.sb.Exec(ctx, "flexiq-scaled", "version")
	d.daemonVersion = strings.TrimSpace(ver)
	status, _ := d.sb.Exec(ctx, "systemctl", "show", "-P", "StatusText", daemonUnit)
	d.logf("%s is active (%s); STATUS=%q", daemonUnit, d.daemonVersion, strings.TrimSpace(status))

	// The test worker stands in for `flexiq worker`; the database directory
	// must be writable by the workers' user for SQLite's -wal and -shm files.
	_, err = d.sh(ctx, "install -m 0755 "+shellQuote(filepath.Join(d.root, "bin", "flexiq-testworker"))+" "+workerBin+
		"\nchown -R flexiq:flexiq "+dbDirInside)
	if err != nil {
		return err
	}
	d.logf("installed the test worker as %s; queue database %s", workerBin, relTo(d.root, d.dbPath))
	return nil
}

// waitActive waits until unit is no longer activating or reloading and
// returns its ActiveState.
func (d *demo) waitActive(ctx context.Context, unit string, within time.Duration) (string, error) {
	deadline := time.Now().Add(within)
	for {
		out, _ := d.sb.Exec(ctx, "systemctl", "show", "-P", "ActiveState", unit)
		state := strings.TrimSpace(out)
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		if state != "activating" && state != "reloading" && state != "" || time.Now().After(deadline) {
			return state, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// poolConfig is the demo's /etc/flexiq-scaled/config.toml.
func (d *demo) poolConfig() string {
	p := d.s.pool
	return fmt.Sprintf(`# Written by flexiq-demo (test/demo): one pool of test workers on a flexiq
# SQLite database that the demo fills from a trace.
[daemon]
poll_interval_sec = 1

[pools.%[1]s]
exec = [%[2]q, "--threads", "%[3]d", "--poll", "50ms"]
environment = { FLEXIQ_DB_PATH = %[4]q }
min_workers = %[5]d
max_workers = %[6]d
threads_per_worker = %[3]d
target_queue_depth_per_worker = %[7]g
# A compressed two minutes: the trace plays %[8]gx faster.
scale_down_window_sec = %[9]g
drain_timeout_sec = 10

[pools.%[1]s.source]
type = "flexiq-sqlite"
path = %[4]q
`, poolName, workerBin, p.Threads, d.inside(d.dbPath), p.MinWorkers, p.MaxWorkers, p.QueueDepth,
		d.s.replay.Speedup, p.ScaleDownWindow.Seconds())
}

// configure replaces the packaged no-pool configuration with the demo pool,
// checks it as an admin would, and reloads the running daemon (SIGHUP, no
// restart). It returns once the pool's min_workers are up.
func (d *demo) configure(ctx context.Context) error {
	host := fmt.Sprintf("/proc/%d/root%s", d.sb.PID, configPath)
	if err := os.MkdirAll(filepath.Dir(host), 0o755); err != nil {
		return err
	}
	// Root-owned and not group/other-writable, or the daemon refuses it.
	if err := os.WriteFile(host, []byte(d.poolConfig()), 0o644); err != nil {
		return err
	}
	if err := os.Chmod(host, 0o644); err != nil {
		return err
	}
	if out, err := d.sb.Exec(ctx, "flexiq-scaled", "check-config"); err != nil {
		return fmt.Errorf("flexiq-scaled check-config: %w\n%s", err, out)
	}
	if _, err := d.sb.Exec(ctx, "systemctl", "reload", daemonUnit); err != nil {
		return err
	}
	conn, err := d.sb.Bus(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		w, err := countWorkers(ctx, conn)
		if err != nil {
			return err
		}
		if w.live >= d.s.pool.MinWorkers {
			break
		}
		if time.Now().After(deadline) {
			out, _ := d.sh(ctx, "journalctl --no-pager -n 30 -u "+daemonUnit)
			return fmt.Errorf("no worker of pool %s came up within 20s of the reload:\n%s", poolName, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	d.logf("wrote %s (pool %q), check-config OK, systemctl reload %s: %d worker up", configPath, poolName, daemonUnit, d.s.pool.MinWorkers)
	return nil
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// relTo shows path relative to the checkout when it is inside it.
func relTo(root, path string) string {
	if rel, err := filepath.Rel(root, path); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return path
}

// lastLine returns the last line of out that starts with prefix, or the last
// non-empty line.
func lastLine(out, prefix string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], prefix) {
			return strings.TrimSpace(lines[i])
		}
	}
	return strings.TrimSpace(lines[len(lines)-1])
}
