package discovery

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/flexiq/flexiq-scaled/internal/atomicfile"
	"github.com/flexiq/flexiq-scaled/internal/safefile"
)

// Options configure a pool's Publisher.
type Options struct {
	Pool string
	// Dir holds POOL.json and POOL.file_sd.json; DefaultDir when empty.
	// Publish creates it; a template's destination directory must exist.
	Dir string
	// MetricsPort is the port name file_sd targets; no file_sd file when
	// empty (a pool without metrics has nothing to scrape).
	MetricsPort string
	Templates   []*Template
	// Wake is the pool's wake address, templates' .Wake.
	Wake string
}

// output is one file a Publisher keeps current.
type output struct {
	path   string
	mode   os.FileMode
	after  *Command
	render func(Set) ([]byte, error)
}

// Publisher keeps one pool's discovery files current. It remembers what it
// last wrote, and before its first write to a path it reads the file
// there, so that a daemon restart with the same ready set neither rewrites
// a file nor reports a change (no needless nginx reload). It also keeps a
// copy of the last set it published without error, and the same set again
// returns at once without rendering (0 allocations at 200 replicas), so
// the loop may call Publish on every tick. It is not safe for concurrent
// use: one pool's loop owns it.
type Publisher struct {
	pool    string
	dir     string
	wake    string
	outputs []output
	last    map[string][]byte // content at the path, once known
	retry   map[string]bool
	// current is the set every output was last rendered and written
	// from without error: the same set again needs no rendering, since
	// the outputs depend on nothing else.
	current *Set
}

// Change is an output Publish rewrote (or one handed to Retry), with the
// command to run after it, if any.
type Change struct {
	Path  string
	After *Command
}

// Result is what one Publish changed, in a fixed order: the JSON file,
// the file_sd file, then the templates in config order.
type Result struct {
	Changed []Change
}

// Commands is the after-change commands to run, each once although several
// templates may name the same one (two files, one nginx reload), in the
// order of the changes. A caller draining a replica waits for all of them
// before it starts the drain period.
func (r Result) Commands() []Command {
	var out []Command
	for _, c := range r.Changed {
		if c.After == nil {
			continue
		}
		if !slices.ContainsFunc(out, c.After.equal) {
			out = append(out, *c.After)
		}
	}
	return out
}

// NewPublisher checks o and returns its pool's Publisher. Two outputs with
// one path are refused: each would overwrite the other on every change.
func NewPublisher(o Options) (*Publisher, error) {
	if o.Pool == "" || strings.ContainsRune(o.Pool, '/') || strings.HasPrefix(o.Pool, ".") {
		return nil, fmt.Errorf("discovery: pool name %q cannot name a file", o.Pool)
	}
	dir := o.Dir
	if dir == "" {
		dir = DefaultDir
	}
	p := &Publisher{pool: o.Pool, dir: dir, wake: o.Wake, last: map[string][]byte{}, retry: map[string]bool{}}
	p.outputs = append(p.outputs, output{path: filepath.Join(dir, o.Pool+".json"), mode: 0o644, render: RenderJSON})
	if o.MetricsPort != "" {
		port := o.MetricsPort
		p.outputs = append(p.outputs, output{
			path: filepath.Join(dir, o.Pool+".file_sd.json"), mode: 0o644,
			render: func(s Set) ([]byte, error) { return RenderFileSD(s, port) },
		})
	}
	for _, t := range o.Templates {
		p.outputs = append(p.outputs, output{path: t.Spec.Destination, mode: t.Spec.Mode, after: t.Spec.After, render: t.Render})
	}
	seen := map[string]bool{}
	for _, out := range p.outputs {
		if seen[out.path] {
			return nil, fmt.Errorf("discovery: pool %s writes %s twice", o.Pool, out.path)
		}
		seen[out.path] = true
	}
	return p, nil
}

// Paths is every file the Publisher writes, in Result order.
func (p *Publisher) Paths() []string {
	out := make([]string, len(p.outputs))
	for i, o := range p.outputs {
		out[i] = o.path
	}
	return out
}

// Retry makes the next Publish report path as changed even if its content
// stays the same: the caller's after-change command for it failed, and
// issue 19 wants it retried at the next change.
// A path the Publisher does not write is ignored.
func (p *Publisher) Retry(path string) {
	if slices.Contains(p.Paths(), path) {
		p.retry[path] = true
	}
}

// Publish renders s to every output and writes those whose content
// changed. When it returns, every file it reports is in place. An output
// that fails to render or write keeps its old file and its error joins
// the returned one; the others are still written and reported, so that a
// broken template does not stop the JSON file from dropping a replica.
// On an error a leaving replica may still be in the failed output, so the
// caller must not start its drain period: it keeps it running and
// publishes again at the next change or tick.
func (p *Publisher) Publish(s Set) (Result, error) {
	if s.Pool != p.pool {
		return Result{}, fmt.Errorf("discovery: pool %s's publisher given pool %s's set", p.pool, s.Pool)
	}
	if !sorted(s.Replicas) {
		// A set not made by NewSet: sort a copy, or the files would
		// change with the caller's order rather than the replicas.
		s = NewSet(s.Pool, s.Replicas)
	}
	s.Wake = p.wake
	if p.current != nil && len(p.retry) == 0 && equalSets(*p.current, s) {
		return Result{}, nil
	}
	p.current = nil
	if err := makeDir(p.dir); err != nil {
		return Result{}, fmt.Errorf("discovery: pool %s: %w", p.pool, err)
	}
	var res Result
	var errs []error
	for _, o := range p.outputs {
		changed, err := p.publishOne(o, s)
		if err != nil {
			errs = append(errs, fmt.Errorf("discovery: pool %s: %w", p.pool, err))
			continue
		}
		if changed || p.retry[o.path] {
			delete(p.retry, o.path)
			res.Changed = append(res.Changed, Change{Path: o.path, After: o.after})
		}
	}
	if len(errs) == 0 {
		p.current = &Set{Pool: s.Pool, Replicas: cloneReplicas(s.Replicas), Wake: s.Wake}
	}
	return res, errors.Join(errs...)
}

func sorted(rs []Replica) bool {
	return slices.IsSortedFunc(rs, func(a, b Replica) int {
		if a.Slot != b.Slot {
			return a.Slot - b.Slot
		}
		return a.Rank - b.Rank
	})
}

func equalSets(a, b Set) bool {
	return a.Pool == b.Pool && a.Wake == b.Wake && slices.EqualFunc(a.Replicas, b.Replicas, func(x, y Replica) bool {
		return x.Slot == y.Slot && x.Unit == y.Unit && x.Address == y.Address && x.Rank == y.Rank && maps.Equal(x.Ports, y.Ports)
	})
}

// cloneReplicas copies the ports too: the caller may reuse its maps.
func cloneReplicas(rs []Replica) []Replica {
	out := slices.Clone(rs)
	for i := range out {
		out[i].Ports = maps.Clone(out[i].Ports)
	}
	return out
}

// publishOne renders o and writes it if its content differs from what is
// known to be at its path; it says whether it wrote.
func (p *Publisher) publishOne(o output, s Set) (bool, error) {
	data, err := o.render(s)
	if err != nil {
		return false, err
	}
	old, known := p.last[o.path]
	if !known {
		old, known, err = readExisting(o.path)
		if err != nil {
			return false, err
		}
		if known {
			p.last[o.path] = old
		}
	}
	if known && bytes.Equal(old, data) {
		return false, nil
	}
	if err := atomicfile.WriteMode(o.path, data, o.mode); err != nil {
		// The file may or may not have been replaced: read it afresh next
		// time rather than trust either content.
		delete(p.last, o.path)
		return false, err
	}
	p.last[o.path] = data
	return true, nil
}

// readExisting reads what is at a destination before the first write to it
// (safefile.Read): known is false when there is nothing, or more than any
// output can hold, which therefore differs from it and is replaced. A
// destination that is not a regular file (a FIFO, which would block the
// pool's loop; a link, which is not followed; a directory) is an error
// naming it, and it is left in place rather than replaced.
func readExisting(path string) (data []byte, known bool, err error) {
	data, _, err = safefile.Read(path, MaxOutput)
	var tooLarge *safefile.TooLargeError
	switch {
	case err == nil:
		return data, true, nil
	case errors.Is(err, fs.ErrNotExist), errors.As(err, &tooLarge):
		return nil, false, nil
	}
	var notRegular *safefile.NotRegularError
	if errors.As(err, &notRegular) {
		return nil, false, fmt.Errorf("%w: left in place, the daemon only replaces a regular file (remove it)", err)
	}
	return nil, false, err
}

// ListedUnits reads the units that DIR/POOL.json lists, as the last
// daemon wrote it, through the same checks as readExisting: at start a
// pool adopts the replicas it lists as ready, so a link to another file
// is not followed and a FIFO does not block the pool. A file that is not
// there or not a discovery file of pool lists none, without an error.
func ListedUnits(dir, pool string) (map[string]bool, error) {
	if dir == "" {
		dir = DefaultDir
	}
	b, known, err := readExisting(filepath.Join(dir, pool+".json"))
	if err != nil || !known {
		return nil, err
	}
	var f jsonFile
	if json.Unmarshal(b, &f) != nil || f.Pool != pool {
		return nil, nil
	}
	out := map[string]bool{}
	for _, r := range f.Replicas {
		out[r.Unit] = true
	}
	return out, nil
}

// makeDir creates dir readable by all when it is missing: the daemon runs
// with UMask=0077, and the programs that read the files (Prometheus as its
// own user) must be able to enter it. An existing directory is the
// administrator's and keeps its mode.
func makeDir(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.Chmod(dir, 0o755)
}
