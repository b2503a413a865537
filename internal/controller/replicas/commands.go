package replicas

// The after-change commands of discovery (issue 19, item 4) run off the
// pool's loop, one batch at a time per pool; their end comes back to the
// loop as a message.

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/discovery"
	"github.com/flexiq/flexiq-scaled/internal/source"
)

// CommandRun is one after-change command's run.
type CommandRun struct {
	Argv []string
	Out  string
	Err  error
	Took time.Duration
}

// CommandsDone is the end of one batch of after-change commands.
type CommandsDone struct {
	Gen  uint64
	Runs []CommandRun
}

// RunCommands runs a batch of after-change commands in order, each within
// its timeout, off the loop; it touches nothing of the pool and hands its
// end to the loop through done (buffered: one batch at a time).
func RunCommands(run source.CommandRunner, pool string, cmds []discovery.Command, gen uint64, done chan<- CommandsDone) {
	d := CommandsDone{Gen: gen}
	for _, c := range cmds {
		ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
		out := &cappedBuffer{max: 4 << 10}
		start := time.Now()
		err := run.RunCommand(ctx, c.Argv(), []string{"FLEXIQ_POOL=" + pool}, out, out)
		if err != nil && ctx.Err() != nil {
			err = fmt.Errorf("timed out after %s: %w", c.Timeout, err)
		}
		cancel()
		d.Runs = append(d.Runs, CommandRun{Argv: c.Argv(), Out: out.String(), Err: err, Took: time.Since(start)})
	}
	done <- d
}

// CommandBound is the longest a batch of svc's after-change commands may
// take.
func CommandBound(svc *config.Service) time.Duration {
	var d time.Duration
	for _, t := range svc.Templates {
		if a := t.Spec.After; a != nil {
			d += a.Timeout
		}
	}
	return d
}

// NewPublisher is the discovery.Publisher of cfg's service.
func NewPublisher(cfg *config.Pool) (*discovery.Publisher, error) {
	pub, err := discovery.NewPublisher(discovery.Options{
		Pool: cfg.Name, Dir: cfg.Service.DiscoveryDir, MetricsPort: cfg.Service.MetricsPort, Templates: cfg.Service.Templates,
		Wake: cfg.Service.Wake.Listen,
	})
	if err != nil {
		return nil, fmt.Errorf("pool %s: discovery: %w", cfg.Name, err)
	}
	return pub, nil
}

// ListedUnits reads the units that DIR/POOL.json lists, as the last
// daemon wrote it; none when it cannot be read (discovery.ListedUnits: a
// FIFO or a link there is no list).
func ListedUnits(cfg *config.Pool) map[string]bool {
	listed, _ := discovery.ListedUnits(cfg.Service.DiscoveryDir, cfg.Name)
	return listed
}

// SameTemplates says whether a reload left the templates as they were:
// the same files, destinations, modes and commands, and the same text
// (the file may have been edited). Each load parses them afresh, so
// pointers always differ.
func SameTemplates(a, b []*discovery.Template) bool {
	return slices.EqualFunc(a, b, func(x, y *discovery.Template) bool {
		xs, ys := x.Spec, y.Spec
		sameAfter := (xs.After == nil) == (ys.After == nil) &&
			(xs.After == nil || xs.After.Path == ys.After.Path && xs.After.Timeout == ys.After.Timeout && slices.Equal(xs.After.Args, ys.After.Args))
		return xs.Source == ys.Source && xs.Destination == ys.Destination && xs.Mode == ys.Mode && sameAfter && x.Text() == y.Text()
	})
}

// Discard is an io.Writer that drops a probe command's output.
type Discard struct{}

func (Discard) Write(b []byte) (int, error) { return len(b), nil }

// cappedBuffer keeps the first max bytes written to it, from the
// command's two pipes at once.
type cappedBuffer struct {
	mu  sync.Mutex
	b   []byte
	max int
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := c.max - len(c.b); room > 0 {
		c.b = append(c.b, p[:min(len(p), room)]...)
	}
	return len(p), nil
}

func (c *cappedBuffer) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.b)
}
