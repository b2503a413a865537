package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/flexiq/flexiq-scaled/internal/atomicfile"
	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/control"
	"github.com/flexiq/flexiq-scaled/internal/hostcheck"
)

// `pool add` and `pool rm` manage one drop-in per pool, conf.d/NAME.toml,
// with the command line of `flexiq autoscale`, so that a pool tried with
// flexiq's own autoscaler moves over by changing the command's name.

// autoscaleFlags are flexiq's `flexiq autoscale` flags (its AutoscaleConfig,
// one flag per field) and the keys they set. Their values are written as
// given, as numbers; the configuration's own checks judge them.
var autoscaleFlags = []struct{ flag, key, usage string }{
	{"min-workers", "min_workers", "fewest workers (default 1)"},
	{"max-workers", "max_workers", "most workers (default 10)"},
	{"target-queue-depth", "target_queue_depth_per_worker", "pending jobs per worker to aim for (default 15)"},
	{"target-utilisation", "target_utilisation", "busy fraction of the workers' threads to aim for, 0 to 1 (default 0.75)"},
	{"scale-up-window", "scale_up_window_sec", "`SECONDS` of scale-up stabilisation (default 0)"},
	{"scale-down-window", "scale_down_window_sec", "`SECONDS` of scale-down stabilisation (default 300)"},
	{"tolerance", "tolerance", "relative change below which the pool holds (default 0.1)"},
	{"poll-interval", "poll_interval_sec", "`SECONDS` between reads of the queue (default: the daemon's)"},
	{"drain-timeout", "drain_timeout_sec", "`SECONDS` a stopping worker has to finish its jobs (default 30)"},
	{"threads-per-worker", "threads_per_worker", "jobs one worker runs at once, or \"auto\" (default 4)"},
	// Beyond flexiq's flags: the keys the daemon adds.
	{"target-cpu-utilisation", "target_cpu_utilisation", "the workers' CPU use to aim for, 0 to 1 (default: off)"},
	{"target-queue-latency", "target_queue_latency_sec", "`SECONDS` the oldest job may wait (default: off)"},
	{"max-surge", "max_surge", "workers a rollout may start above the count (default 1)"},
}

// poolStringFlags are flags whose values are strings, and their keys.
var poolStringFlags = []struct{ flag, key, usage string }{
	{"app", "app", "flexiq `APP` path, as for `flexiq worker --app` (the command is then flexiq worker --app APP)"},
	{"worker-user", "user", "the workers' `USER` (default flexiq)"},
	{"worker-group", "group", "the workers' `GROUP` (default: the user's)"},
	{"working-directory", "working_directory", "the workers' working `DIR`"},
	{"drain-signal", "drain_signal", "the `SIGNAL` that asks a worker to drain (default SIGTERM)"},
	{"hardening", "hardening", "worker sandbox preset: none, default or strict"},
	{"demand", "demand", "demand model, e.g. \"littles-law\""},
}

var poolNameRE = regexp.MustCompile(`^[a-z0-9_]{1,32}$`)

func cmdPool(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "add":
			return cmdPoolAdd(args[1:], stdout, stderr)
		case "rm", "remove":
			return cmdPoolRm(args[1:], stdout, stderr)
		case "-h", "-help", "--help":
			fmt.Fprint(stdout, poolUsage)
			return exitOK
		}
	}
	fmt.Fprint(stderr, poolUsage)
	return exitUsage
}

const poolUsage = `usage: flexiq-scaled pool add NAME --app APP [flags] [-- COMMAND ARGS...]
       flexiq-scaled pool rm NAME [flags]

Manage a pool as a drop-in of its own, conf.d/NAME.toml beside the
configuration file, with the flags of flexiq's "flexiq autoscale". Run
"flexiq-scaled pool add --help" for the flags.
`

// splitName takes the pool's name from the command line, before or after
// the flags (flag parsing stops at the first non-flag).
func splitName(args []string) (name string, rest []string) {
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		return args[0], args[1:]
	}
	return "", args
}

// onePoolName parses the flags of a command whose one argument is a pool
// name, given before or after them. noun names it in the usage error.
func onePoolName(fs *flag.FlagSet, args []string, stdout, stderr io.Writer, noun string) (name string, code int, done bool) {
	name, rest := splitName(args)
	if code, done := parseFlags(fs, rest, stdout, stderr); done {
		return "", code, true
	}
	tail := fs.Args()
	if name == "" && len(tail) > 0 {
		name, tail = tail[0], tail[1:]
	}
	switch {
	case name == "":
		return "", usageError(fs, stderr, "no %s given", noun), true
	case len(tail) > 0:
		return "", usageError(fs, stderr, "unexpected argument %q", tail[0]), true
	case !poolNameRE.MatchString(name):
		return "", usageError(fs, stderr, "pool name %q: want 1 to 32 of a-z, 0-9 and _", name), true
	}
	return name, exitOK, false
}

type poolCommon struct {
	configPath *string
	noReload   *bool
	cf         controlFlags
}

func addPoolCommon(fs *flag.FlagSet) poolCommon {
	return poolCommon{
		configPath: fs.String("config", config.DefaultPath, "the configuration `FILE`; the drop-in goes to conf.d beside it"),
		noReload:   fs.Bool("no-reload", false, "write and check the drop-in, but do not reload the daemon"),
		cf:         addControlFlags(fs),
	}
}

type envFlag []string

func (e *envFlag) String() string { return strings.Join(*e, " ") }
func (e *envFlag) Set(v string) error {
	if k, _, ok := strings.Cut(v, "="); !ok || k == "" {
		return fmt.Errorf("want KEY=VALUE, got %q", v)
	}
	*e = append(*e, v)
	return nil
}

func cmdPoolAdd(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("pool add", "NAME --app APP [flags] [-- COMMAND ARGS...]", `
Write a pool to conf.d/NAME.toml beside the configuration file
(/etc/flexiq-scaled/conf.d/NAME.toml), check the whole configuration as
check-config does, and reload the daemon. The flags are those of flexiq's
"flexiq autoscale" (every AutoscaleConfig field), so that

    flexiq autoscale --app myapp.tasks:queue --min-workers 2 --max-workers 20 \
        --target-queue-depth 25 --drain-timeout 60

becomes "flexiq-scaled pool add email --db /var/lib/flexiq/flexiq.db" and the
same flags. --db names the queue's database (the [pools.NAME.source] path);
another source type takes its keys by editing the file afterwards. A
COMMAND after "--" is the worker's command line, instead of the
"flexiq worker --app APP" that --app implies.

The file is written atomically, mode 0640. A configuration with problems is
refused and the file removed (or the one it replaced put back, with
--force); so is one the daemon refuses on reload. When the daemon is not
running the file stays, it is said on stderr, and the exit status is 0: the
pool starts with the daemon.`)
	pf := addPoolAddFlags(fs)
	common := pf.common

	name, rest := splitName(args)
	// The worker's command is everything after "--", which the flag
	// package would swallow without a trace.
	var command []string
	if i := slices.Index(rest, "--"); i >= 0 {
		rest, command = rest[:i], rest[i+1:]
	}
	if code, done := parseFlags(fs, rest, stdout, stderr); done {
		return code
	}
	tail := fs.Args()
	if name == "" && len(tail) > 0 {
		name, tail = tail[0], tail[1:]
	}
	if len(tail) > 0 {
		return usageError(fs, stderr, "unexpected argument %q (a worker command goes after --)", tail[0])
	}
	tail = command
	switch {
	case name == "":
		return usageError(fs, stderr, "no pool NAME given")
	case !poolNameRE.MatchString(name):
		return usageError(fs, stderr, "pool name %q: want 1 to 32 of a-z, 0-9 and _", name)
	case *pf.strs["app"] == "" && len(tail) == 0:
		return usageError(fs, stderr, "--app APP, or a worker command after --, is required")
	case *pf.strs["app"] != "" && len(tail) > 0:
		return usageError(fs, stderr, "give --app APP or a worker command after --, not both")
	case *pf.db == "" && *pf.sourceType == "":
		return usageError(fs, stderr, "--db PATH (the queue's database) is required")
	}

	table, err := pf.table(tail)
	if err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	path, undo, err := writePoolDropIn(*common.configPath, name, table, *pf.force)
	if err != nil {
		return failf(stderr, "pool add", "%v", err)
	}
	if problems := checkAll(*common.configPath, stderr); len(problems) > 0 {
		undo()
		fmt.Fprintf(stderr, "%s pool add: configuration refused, %s not written:\n", prog, path)
		for _, p := range problems {
			fmt.Fprintln(stderr, p)
		}
		return exitFail
	}
	fmt.Fprintf(stdout, "wrote %s\n", path)
	if *common.noReload {
		return exitOK
	}
	return poolReload("pool add", common.cf, stdout, stderr, undo)
}

func cmdPoolRm(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("pool rm", "NAME [flags]", `
Remove conf.d/NAME.toml, written by "pool add", and reload the daemon, which
drains the pool's workers away. A pool defined in config.toml itself is not
removed: edit that file.`)
	common := addPoolCommon(fs)
	name, code, done := onePoolName(fs, args, stdout, stderr, "pool NAME")
	if done {
		return code
	}
	path := filepath.Join(config.DropInDir(*common.configPath), name+".toml")
	if err := config.CheckDropInFile(path); err != nil {
		return failf(stderr, "pool rm", "%v", err)
	}
	previous, err := config.ReadDropIn(path)
	if errors.Is(err, os.ErrNotExist) {
		return failf(stderr, "pool rm", "%s does not exist: pool %s was not added with pool add (see check-config for where it is defined)", path, name)
	}
	if err != nil {
		return failf(stderr, "pool rm", "%v", err)
	}
	if err := os.Remove(path); err != nil {
		return failf(stderr, "pool rm", "%v", err)
	}
	fmt.Fprintf(stdout, "removed %s\n", path)
	if *common.noReload {
		return exitOK
	}
	return poolReload("pool rm", common.cf, stdout, stderr, func() { atomicfile.WriteMode(path, previous, 0o640) })
}

// checkAll is check-config's verdict on the configuration, as problems,
// with the warnings printed to stderr.
func checkAll(path string, stderr io.Writer) []string {
	var problems []string
	cfg, err := config.Load(path)
	var cerr *config.Error
	switch {
	case errors.As(err, &cerr):
		for _, p := range cerr.Problems {
			problems = append(problems, p.String())
		}
	case err != nil:
		problems = append(problems, fmt.Sprintf("%s: %v", path, err))
	default:
		for _, w := range hostcheck.Warnings(cfg) {
			fmt.Fprintln(stderr, "warning: "+w)
		}
		machine, _ := hostcheck.CheckMachine(cfg)
		for _, p := range slices.Concat(machine, hostcheck.CheckExecutables(cfg)) {
			problems = append(problems, p.String())
		}
	}
	if err := hostcheck.CheckConfigSafety(path); err != nil {
		problems = append(problems, strings.Split(err.Error(), "\n")...)
	}
	return problems
}

// poolReload asks the daemon to reload, as `reload` does. A daemon that
// refuses puts the file back as it was (undo); one that is not running
// leaves it for its next start.
func poolReload(name string, cf controlFlags, stdout, stderr io.Writer, undo func()) int {
	v, err := cf.client().Reload()
	if errors.Is(err, control.ErrNotRunning) {
		fmt.Fprintf(stderr, "%s %s: not reloaded, the change applies when the daemon starts: %v\n", prog, name, err)
		return exitOK
	}
	if err != nil {
		return failf(stderr, name, "reload: %v", err)
	}
	if !v.OK {
		undo()
		fmt.Fprintf(stderr, "%s %s: the daemon refused the configuration and keeps the old one; the change is undone:\n", prog, name)
	}
	return report(v, stdout, stderr)
}

// poolAddFlags are pool add's flags: flexiq autoscale's, and the source's.
type poolAddFlags struct {
	nums, strs     map[string]*string
	db, sourceType *string
	env, envFiles  envFlag
	force          *bool
	common         poolCommon
}

func addPoolAddFlags(fs *flag.FlagSet) *poolAddFlags {
	pf := &poolAddFlags{nums: map[string]*string{}, strs: map[string]*string{}}
	for _, f := range autoscaleFlags {
		pf.nums[f.key] = fs.String(f.flag, "", f.usage)
	}
	for _, f := range poolStringFlags {
		pf.strs[f.key] = fs.String(f.flag, "", f.usage)
	}
	pf.db = fs.String("db", "", "the queue's database `PATH` ([pools.NAME.source] path)")
	pf.sourceType = fs.String("source-type", "", "the source `TYPE` (default flexiq-sqlite)")
	fs.Var(&pf.env, "env", "`KEY=VALUE` in the workers' environment (repeatable)")
	fs.Func("environment-file", "a systemd EnvironmentFile= `PATH` for the workers (repeatable)", func(v string) error {
		pf.envFiles = append(pf.envFiles, v)
		return nil
	})
	pf.force = fs.Bool("force", false, "replace an existing conf.d/NAME.toml")
	pf.common = addPoolCommon(fs)
	return pf
}

// table is the [pools.NAME] table the flags describe, with command (after
// "--") as its exec.
func (pf *poolAddFlags) table(command []string) (map[string]any, error) {
	table := map[string]any{}
	for key, v := range pf.strs {
		if *v != "" {
			table[key] = *v
		}
	}
	for _, f := range autoscaleFlags {
		v := *pf.nums[f.key]
		if v == "" {
			continue
		}
		if f.key == "threads_per_worker" && v == "auto" {
			table[f.key] = v
			continue
		}
		if i, err := strconv.ParseInt(v, 10, 64); err == nil {
			table[f.key] = i
		} else if x, err := strconv.ParseFloat(v, 64); err == nil {
			table[f.key] = x
		} else {
			return nil, fmt.Errorf("--%s %q: not a number", f.flag, v)
		}
	}
	if len(command) > 0 {
		table["exec"] = command
	}
	if len(pf.env) > 0 {
		m := map[string]string{}
		for _, kv := range pf.env {
			k, v, _ := strings.Cut(kv, "=")
			m[k] = v
		}
		table["environment"] = m
	}
	if len(pf.envFiles) > 0 {
		table["environment_file"] = []string(pf.envFiles)
	}
	source := map[string]any{}
	if *pf.sourceType != "" {
		source["type"] = *pf.sourceType
	}
	if *pf.db != "" {
		source["path"] = *pf.db
	}
	table["source"] = source
	return table, nil
}

// writePoolDropIn writes conf.d/NAME.toml beside configPath, atomically,
// and returns how to undo it: the file it replaced is put back, or the new
// one removed.
func writePoolDropIn(configPath, name string, table map[string]any, force bool) (path string, undo func(), err error) {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "# Written by: flexiq-scaled pool add %s\n# Remove with: flexiq-scaled pool rm %s\n\n", name, name)
	enc := toml.NewEncoder(&buf)
	enc.Indent = ""
	if err := enc.Encode(map[string]any{"pools": map[string]any{name: table}}); err != nil {
		return "", nil, err
	}
	dir := config.DropInDir(configPath)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, err
	}
	path = filepath.Join(dir, name+".toml")
	// A link or anything else that is not a regular file is refused, not
	// followed: its target would be read as "previous" and written back
	// into conf.d by undo, a copy of whatever the link points at.
	if err := config.CheckDropInFile(path); err != nil {
		return "", nil, err
	}
	previous, err := config.ReadDropIn(path)
	switch {
	case err == nil && !force:
		return "", nil, fmt.Errorf("%s exists: remove the pool first (pool rm %s), or replace it with --force", path, name)
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return "", nil, err
	case err != nil:
		previous = nil
	}
	undo = func() {
		if previous != nil {
			atomicfile.WriteMode(path, previous, 0o640)
		} else {
			os.Remove(path)
		}
	}
	if err := atomicfile.WriteMode(path, buf.Bytes(), 0o640); err != nil {
		return "", nil, err
	}
	return path, undo, nil
}
