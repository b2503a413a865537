package source

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"sync"
	"time"
)

// A panic in a source's code (a client library's, or ours, on a reply no
// one foresaw) must not end the daemon: it supervises every pool's workers,
// and one source's fault would stop scaling for all of them. Every source
// New returns is wrapped by Guard, which turns a panic in any of its
// methods into an error for that pool alone, which then holds as for any
// outage; the goroutines a source starts for its wake-up recover their own
// panics (goGuarded, watchLoop), since a recover in the caller cannot catch
// them.

// PanicError is a panic recovered in a source's code.
type PanicError struct {
	Type  string // the source type
	Op    string // where: "Observe", "Watch", "the wake-up's goroutine", ...
	Value any    // what panicked
	// Stack is the panicking goroutine's stack. It is set on the first
	// panic of a source only, so that it is logged once, not at every tick.
	Stack []byte
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("%s source: panic in %s: %v", e.Type, e.Op, e.Value)
}

// guarded is a source whose every method recovers from a panic.
type guarded struct {
	typ   string
	inner Source

	mu      sync.Mutex
	onPanic func(*PanicError)
	stacked bool // the first panic's stack was handed over
}

// Guard wraps src so that a panic in any of its methods, or in a goroutine
// its Watch starts, becomes a *PanicError. The first panic's error, stack
// included, goes to onPanic (the daemon logs it to the pool's journal); nil
// writes it to stderr. The wrapper is a Source only: its optional
// interfaces (Watcher, ThreadsReporter, DemandReader, Querier) are reached
// through As, which guards them too. Guarding a guarded source only sets
// its onPanic.
func Guard(src Source, typ string, onPanic func(*PanicError)) Source {
	if gs, ok := src.(interface{ guard() *guarded }); ok {
		if onPanic != nil {
			g := gs.guard()
			g.mu.Lock()
			g.onPanic = onPanic
			g.mu.Unlock()
		}
		return src
	}
	return &guarded{typ: typ, inner: src, onPanic: onPanic}
}

// As returns src's T, one of the optional interfaces Watcher,
// ThreadsReporter, DemandReader and Querier, when src implements it (what
// its type declared: define). Through a guard, its methods are guarded as
// the source's own are.
func As[T any](src Source) (T, bool) {
	var zero T
	gs, isGuard := src.(interface{ guard() *guarded })
	if !isGuard {
		t, ok := src.(T)
		return t, ok
	}
	g := gs.guard()
	if _, ok := g.inner.(T); !ok {
		return zero, false
	}
	var w any
	switch any(&zero).(type) {
	case *Watcher:
		w = gWatch{g}
	case *ThreadsReporter:
		w = gThreads{g}
	case *DemandReader:
		w = gDemand{g}
	case *Querier:
		w = gQuery{g}
	default:
		// An interface with no guard of its own: not reached through one.
		return zero, false
	}
	return w.(T), true
}

func (g *guarded) guard() *guarded { return g }

// recovered makes the error of a recovered panic, and hands the first one
// of this source, with its stack, to onPanic. It is called from the
// deferred function, so the stack is the panicking goroutine's.
func (g *guarded) recovered(op string, v any) error {
	pe := &PanicError{Type: g.typ, Op: op, Value: v}
	g.mu.Lock()
	first, hook := !g.stacked, g.onPanic
	g.stacked = true
	g.mu.Unlock()
	if first {
		withStack := *pe
		withStack.Stack = debug.Stack()
		if hook != nil {
			hook(&withStack)
		} else {
			fmt.Fprintf(os.Stderr, "%v\n%s", pe, withStack.Stack)
		}
	}
	return pe
}

func (g *guarded) Observe(ctx context.Context, now time.Time) (c Counts, err error) {
	defer func() {
		if v := recover(); v != nil {
			c, err = Counts{}, g.recovered("Observe", v)
		}
	}()
	return g.inner.Observe(ctx, now)
}

func (g *guarded) Close() (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = g.recovered("Close", v)
		}
	}()
	return g.inner.Close()
}

type gWatch struct{ g *guarded }

// Watch passes the source's own goroutines a way to report their panics
// (the context), since they outlive this call.
func (w gWatch) Watch(ctx context.Context, wake func()) (how string, err error) {
	defer func() {
		if v := recover(); v != nil {
			how, err = "", w.g.recovered("Watch", v)
		}
	}()
	ctx = context.WithValue(ctx, panicSinkKey{}, w.g)
	return w.g.inner.(Watcher).Watch(ctx, wake)
}

type gThreads struct{ g *guarded }

func (t gThreads) Threads(ctx context.Context, now time.Time) (n int, ok bool, err error) {
	defer func() {
		if v := recover(); v != nil {
			n, ok, err = 0, false, t.g.recovered("Threads", v)
		}
	}()
	return t.g.inner.(ThreadsReporter).Threads(ctx, now)
}

type gDemand struct{ g *guarded }

func (d gDemand) Demand(ctx context.Context, now time.Time, window time.Duration) (dm Demand, err error) {
	defer func() {
		if v := recover(); v != nil {
			dm, err = Demand{}, d.g.recovered("Demand", v)
		}
	}()
	return d.g.inner.(DemandReader).Demand(ctx, now, window)
}

type gQuery struct{ g *guarded }

func (q gQuery) Conditions(ctx context.Context, queries []string) (out map[string]ConditionResult) {
	defer func() {
		if v := recover(); v != nil {
			err := q.g.recovered("Conditions", v)
			out = make(map[string]ConditionResult, len(queries))
			for _, s := range queries {
				out[s] = ConditionResult{Err: err}
			}
		}
	}()
	return q.g.inner.(Querier).Conditions(ctx, queries)
}

// panicSinkKey carries, in a Watch's context, the guard its goroutines
// report their panics to.
type panicSinkKey struct{}

// recoverIn turns a value recovered in a source's own goroutine into an
// error, reported to the guard of the Watch whose ctx it is (or, for a
// source used without Guard, written to stderr). Call it from the deferred
// function that recovered, so that the stack is the panicking one.
func recoverIn(ctx context.Context, typ, op string, v any) error {
	if g, ok := ctx.Value(panicSinkKey{}).(*guarded); ok {
		return g.recovered(op, v)
	}
	pe := &PanicError{Type: typ, Op: op, Value: v}
	fmt.Fprintf(os.Stderr, "%v\n%s", pe, debug.Stack())
	return pe
}

// goGuarded runs fn in a goroutine of its own that survives fn's panic:
// the panic is reported (recoverIn), and the goroutine ends.
func goGuarded(ctx context.Context, typ, op string, fn func()) {
	go func() {
		defer func() {
			if v := recover(); v != nil {
				recoverIn(ctx, typ, op, v)
			}
		}()
		fn()
	}()
}

// unguard returns the source a guard wraps, or src itself.
func unguard(src Source) Source {
	if gs, ok := src.(interface{ guard() *guarded }); ok {
		return gs.guard().inner
	}
	return src
}
