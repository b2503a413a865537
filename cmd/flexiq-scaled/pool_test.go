package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/source"
)

// pool add writes what flexiq autoscale's flags mean, the file checks, and
// pool rm takes it away; neither touches config.toml.
func TestPoolAddRm(t *testing.T) {
	userName, groupName := identity(t)
	cfg := writeFile(t, "config.toml", "[daemon]\npoll_interval_sec = 2\n")
	r := invoke(t, "pool", "add", "email", "--config", cfg, "--no-reload",
		"--min-workers", "2", "--max-workers", "20",
		"--target-queue-depth", "25", "--drain-timeout", "60", "--tolerance", "0.2",
		"--scale-down-window", "120", "--threads-per-worker", "8", "--target-utilisation", "0.5",
		"--scale-up-window", "1.5", "--poll-interval", "3",
		"--worker-user", userName, "--worker-group", groupName, "--db", "/var/lib/flexiq/flexiq.db",
		"--env", "QUEUE=email", "--", "/bin/sh", "-c", "exec sleep infinity")
	if r.code != 0 {
		t.Fatal(r)
	}
	path := filepath.Join(filepath.Dir(cfg), "conf.d", "email.toml")
	if !strings.Contains(r.stdout, "wrote "+path) {
		t.Errorf("stdout %q does not name %s", r.stdout, path)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %04o, want 0640", fi.Mode().Perm())
	}
	c, err := config.Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := c.Pools["email"]
	if p == nil || c.FileOf("email") != path {
		t.Fatalf("pool email not loaded from %s: %+v", path, c)
	}
	if p.MinWorkers != 2 || p.MaxWorkers != 20 || p.TargetQueueDepthPerWorker != 25 ||
		p.DrainTimeout.Seconds() != 60 || p.Tolerance != 0.2 || p.ScaleDownWindow.Seconds() != 120 ||
		p.ThreadsPerWorker != 8 || p.TargetUtilisation != 0.5 || p.ScaleUpWindow.Seconds() != 1.5 ||
		p.PollInterval.Seconds() != 3 || !reflect.DeepEqual(p.Source.Settings, source.FlexiqSQLiteSettings{Path: "/var/lib/flexiq/flexiq.db"}) ||
		p.Environment["QUEUE"] != "email" || strings.Join(p.Exec, " ") != "/bin/sh -c exec sleep infinity" {
		t.Errorf("pool %+v", p)
	}

	// Added twice: refused, the file kept.
	r = invoke(t, "pool", "add", "email", "--config", cfg, "--no-reload", "--app", "x:y", "--db", "/x.db")
	if r.code != 1 || !strings.Contains(r.stderr, "exists") {
		t.Errorf("second add: %v", r)
	}

	r = invoke(t, "pool", "rm", "email", "--config", cfg, "--no-reload")
	if r.code != 0 {
		t.Fatal(r)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("%s still there: %v", path, err)
	}
	r = invoke(t, "pool", "rm", "email", "--config", cfg, "--no-reload")
	if r.code != 1 || !strings.Contains(r.stderr, "does not exist") {
		t.Errorf("second rm: %v", r)
	}
}

// A pool that does not check is refused, and no file is left behind; one
// that replaces a good file with --force puts the good one back.
func TestPoolAddRefused(t *testing.T) {
	userName, _ := identity(t)
	cfg := writeFile(t, "config.toml", "")
	path := filepath.Join(filepath.Dir(cfg), "conf.d", "email.toml")
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"max below min", []string{"--min-workers", "5", "--max-workers", "2"}, "pools.email.max_workers"},
		{"not a number", []string{"--max-workers", "many"}, `--max-workers "many": not a number`},
		{"no such user", []string{"--worker-user", "no_such_user_here"}, `user "no_such_user_here" does not exist`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"pool", "add", "email", "--config", cfg, "--no-reload",
				"--db", "/var/lib/flexiq/flexiq.db", "--worker-user", userName}, tt.args...)
			args = append(args, "--", "/bin/true")
			r := invoke(t, args...)
			if r.code == 0 || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("want a failure naming %q: %v", tt.want, r)
			}
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Errorf("%s left behind: %v", path, err)
			}
		})
	}
	good := []string{"pool", "add", "email", "--config", cfg, "--no-reload",
		"--db", "/var/lib/flexiq/flexiq.db", "--worker-user", userName, "--max-workers", "3", "--", "/bin/true"}
	if r := invoke(t, good...); r.code != 0 {
		t.Fatal(r)
	}
	before, _ := os.ReadFile(path)
	if r := invoke(t, append(good[:len(good)-2], "--force", "--min-workers", "9", "--", "/bin/true")...); r.code == 0 {
		t.Fatalf("min 9 > max 3 accepted: %v", r)
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Errorf("refused --force left\n%s\nwant\n%s", after, before)
	}
}

func TestPoolUsage(t *testing.T) {
	for _, args := range [][]string{{"pool"}, {"pool", "frob"}, {"pool", "add"}, {"pool", "add", "Bad/Name", "--app", "x", "--db", "/x"}, {"pool", "rm"},
		{"pool", "add", "x", "--app", "x:y", "--db", "/x", "--", "/bin/true"}} {
		if r := invoke(t, args...); r.code != exitUsage {
			t.Errorf("%q: %v", args, r)
		}
	}
}

// check-config reads the drop-ins too: a pool defined twice names both
// files, and a good drop-in shows in the effective configuration.
func TestCheckConfigDropIns(t *testing.T) {
	userName, _ := identity(t)
	pool := "[pools.email]\nexec = [\"/bin/true\"]\nuser = \"" + userName + "\"\n[pools.email.source]\npath = \"/nonexistent/flexiq.db\"\n"
	cfg := writeFile(t, "config.toml", "")
	dir := filepath.Join(filepath.Dir(cfg), "conf.d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "10-email.toml"), []byte(pool), 0o640); err != nil {
		t.Fatal(err)
	}
	r := invoke(t, "check-config", cfg)
	if r.code != 0 || !strings.Contains(r.stdout, "# Drop-in: \""+filepath.Join(dir, "10-email.toml")+"\"") ||
		!strings.Contains(r.stdout, "[pools.email]") {
		t.Fatalf("check-config with a drop-in: %v", r)
	}
	if err := os.WriteFile(filepath.Join(dir, "20-again.toml"), []byte(pool), 0o640); err != nil {
		t.Fatal(err)
	}
	r = invoke(t, "check-config", cfg)
	want := filepath.Join(dir, "20-again.toml") + `: pools.email: pool "email" is already defined in ` + filepath.Join(dir, "10-email.toml")
	if r.code != 1 || !strings.Contains(r.stderr, want) {
		t.Errorf("want exit 1 and %q: %v", want, r)
	}
}

// A drop-in that is a symbolic link (here to a root-only secret) is
// refused by pool add --force and pool rm, naming it; neither the link nor
// its target is read, copied or changed.
func TestPoolDropInSymlink(t *testing.T) {
	userName, _ := identity(t)
	cfg := writeFile(t, "config.toml", "")
	dir := filepath.Join(filepath.Dir(cfg), "conf.d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(t.TempDir(), "secret")
	const secretText = "password = \"hunter2\"\n"
	if err := os.WriteFile(secret, []byte(secretText), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "email.toml")
	if err := os.Symlink(secret, path); err != nil {
		t.Fatal(err)
	}
	check := func(what string, r result) {
		t.Helper()
		if r.code == 0 || !strings.Contains(r.stderr, path+" is a symbolic link") {
			t.Errorf("%s: want a refusal naming %s as a symbolic link: %v", what, path, r)
		}
		if strings.Contains(r.stderr+r.stdout, "hunter2") {
			t.Errorf("%s: the secret was read: %v", what, r)
		}
		if target, err := os.Readlink(path); err != nil || target != secret {
			t.Errorf("%s: the link was changed: %q, %v", what, target, err)
		}
		if fi, err := os.Stat(secret); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: the secret was changed: %v, %v", what, fi, err)
		}
		if b, _ := os.ReadFile(secret); string(b) != secretText {
			t.Errorf("%s: the secret now reads %q", what, b)
		}
	}
	// A pool that does not check, so that --force's undo would run.
	check("pool add --force", invoke(t, "pool", "add", "email", "--config", cfg, "--no-reload", "--force",
		"--db", "/var/lib/flexiq/flexiq.db", "--worker-user", userName, "--min-workers", "5", "--max-workers", "2", "--", "/bin/true"))
	check("pool add --force (good pool)", invoke(t, "pool", "add", "email", "--config", cfg, "--no-reload", "--force",
		"--db", "/var/lib/flexiq/flexiq.db", "--worker-user", userName, "--", "/bin/true"))
	check("pool rm", invoke(t, "pool", "rm", "email", "--config", cfg, "--no-reload"))
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("conf.d holds %d entries, want the link only", len(entries))
	}
}
