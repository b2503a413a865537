package source

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// The guard's pieces, for fakes of every combination of optional
// interfaces.
type (
	fakeBase    struct{ panics bool }
	fakeWatch   struct{ b *fakeBase }
	fakeThreads struct{ b *fakeBase }
	fakeDemand  struct{ b *fakeBase }
	fakeQuery   struct{ b *fakeBase }
)

func (f *fakeBase) Observe(context.Context, time.Time) (Counts, error) {
	if f.panics {
		var m map[int]int
		m[1] = 1
	}
	return Counts{Pending: 7}, nil
}
func (f *fakeBase) Close() error { return nil }
func (f fakeWatch) Watch(context.Context, func()) (string, error) {
	if f.b.panics {
		panic("watch exploded")
	}
	return "fake", nil
}
func (f fakeThreads) Threads(context.Context, time.Time) (int, bool, error) {
	if f.b.panics {
		panic("threads exploded")
	}
	return 3, true, nil
}
func (f fakeDemand) Demand(context.Context, time.Time, time.Duration) (Demand, error) {
	if f.b.panics {
		panic("demand exploded")
	}
	return Demand{Known: true}, nil
}
func (f fakeQuery) Conditions(_ context.Context, qs []string) map[string]ConditionResult {
	if f.b.panics {
		panic("query exploded")
	}
	return map[string]ConditionResult{}
}

// fakeOf builds a source implementing the optional interfaces of mask
// (1 Watcher, 2 ThreadsReporter, 4 DemandReader, 8 Querier), by the same
// embedding Guard uses, but from the fakes.
func fakeOf(mask int, panics bool) Source {
	b := &fakeBase{panics: panics}
	w, t, d, q := fakeWatch{b}, fakeThreads{b}, fakeDemand{b}, fakeQuery{b}
	switch mask {
	case 1:
		return struct {
			*fakeBase
			fakeWatch
		}{b, w}
	case 2:
		return struct {
			*fakeBase
			fakeThreads
		}{b, t}
	case 3:
		return struct {
			*fakeBase
			fakeWatch
			fakeThreads
		}{b, w, t}
	case 4:
		return struct {
			*fakeBase
			fakeDemand
		}{b, d}
	case 5:
		return struct {
			*fakeBase
			fakeWatch
			fakeDemand
		}{b, w, d}
	case 6:
		return struct {
			*fakeBase
			fakeThreads
			fakeDemand
		}{b, t, d}
	case 7:
		return struct {
			*fakeBase
			fakeWatch
			fakeThreads
			fakeDemand
		}{b, w, t, d}
	case 8:
		return struct {
			*fakeBase
			fakeQuery
		}{b, q}
	case 9:
		return struct {
			*fakeBase
			fakeWatch
			fakeQuery
		}{b, w, q}
	case 10:
		return struct {
			*fakeBase
			fakeThreads
			fakeQuery
		}{b, t, q}
	case 11:
		return struct {
			*fakeBase
			fakeWatch
			fakeThreads
			fakeQuery
		}{b, w, t, q}
	case 12:
		return struct {
			*fakeBase
			fakeDemand
			fakeQuery
		}{b, d, q}
	case 13:
		return struct {
			*fakeBase
			fakeWatch
			fakeDemand
			fakeQuery
		}{b, w, d, q}
	case 14:
		return struct {
			*fakeBase
			fakeThreads
			fakeDemand
			fakeQuery
		}{b, t, d, q}
	case 15:
		return struct {
			*fakeBase
			fakeWatch
			fakeThreads
			fakeDemand
			fakeQuery
		}{b, w, t, d, q}
	}
	return b
}

func maskOf(s Source) int {
	m := 0
	if _, ok := As[Watcher](s); ok {
		m |= 1
	}
	if _, ok := As[ThreadsReporter](s); ok {
		m |= 2
	}
	if _, ok := As[DemandReader](s); ok {
		m |= 4
	}
	if _, ok := As[Querier](s); ok {
		m |= 8
	}
	return m
}

// A guarded source gives (As) exactly the optional interfaces of the
// source it wraps, and implements none itself, so that a type assertion
// cannot reach around its guard; it passes every call through, and turns a panic in any of them
// into an error naming the source type and the panic; the stack is handed
// over once.
func TestGuard(t *testing.T) {
	ctx := context.Background()
	for mask := range 16 {
		if got := maskOf(fakeOf(mask, false)); got != mask {
			t.Fatalf("fake %d implements %d", mask, got)
		}
		g := Guard(fakeOf(mask, false), "fake", nil)
		if got := maskOf(g); got != mask {
			t.Errorf("guarded source of interfaces %04b gives %04b", mask, got)
		}
		if got := capsOf(g); got != 0 {
			t.Errorf("guarded source of interfaces %04b implements %04b itself", mask, got)
		}
		if c, err := g.Observe(ctx, time.Now()); err != nil || c.Pending != 7 {
			t.Errorf("mask %d: Observe = %+v, %v", mask, c, err)
		}

		var stacks []*PanicError
		p := Guard(fakeOf(mask, true), "fake", func(pe *PanicError) { stacks = append(stacks, pe) })
		if Guard(p, "fake", nil) != p {
			t.Errorf("mask %d: guarding a guarded source wrapped it again", mask)
		}
		_, err := p.Observe(ctx, time.Now())
		checkPanic(t, err, "fake source: panic in Observe: assignment to entry in nil map")
		if w, ok := As[Watcher](p); ok {
			_, err := w.Watch(ctx, func() {})
			checkPanic(t, err, "fake source: panic in Watch: watch exploded")
		}
		if tr, ok := As[ThreadsReporter](p); ok {
			_, _, err := tr.Threads(ctx, time.Now())
			checkPanic(t, err, "fake source: panic in Threads: threads exploded")
		}
		if dr, ok := As[DemandReader](p); ok {
			_, err := dr.Demand(ctx, time.Now(), time.Minute)
			checkPanic(t, err, "fake source: panic in Demand: demand exploded")
		}
		if q, ok := As[Querier](p); ok {
			r := q.Conditions(ctx, []string{"up"})
			checkPanic(t, r["up"].Err, "fake source: panic in Conditions: query exploded")
		}
		if len(stacks) != 1 || !strings.Contains(string(stacks[0].Stack), "fakeBase).Observe") {
			t.Errorf("mask %d: %d stacks handed over, want 1, of Observe", mask, len(stacks))
		}
	}
}

func checkPanic(t *testing.T, err error, want string) {
	t.Helper()
	var pe *PanicError
	if !errors.As(err, &pe) || err.Error() != want {
		t.Errorf("error %v, want a *PanicError %q", err, want)
	}
}

// A panic in a goroutine a source started is recovered there and reported
// to the guard of the Watch that started it.
func TestGoGuardedReportsToTheGuard(t *testing.T) {
	got := make(chan *PanicError, 1)
	g := Guard(fakeOf(1, false), "fake", func(pe *PanicError) { got <- pe })
	ctx := context.WithValue(context.Background(), panicSinkKey{}, g.(interface{ guard() *guarded }).guard())
	goGuarded(ctx, "fake", "a goroutine", func() { panic("in a goroutine") })
	select {
	case pe := <-got:
		if pe.Error() != "fake source: panic in a goroutine: in a goroutine" || len(pe.Stack) == 0 {
			t.Errorf("reported %v, stack %d bytes", pe, len(pe.Stack))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no report of the goroutine's panic")
	}
}

// mustAs is As for a source known to have T.
func mustAs[T any](t testing.TB, src Source) T {
	t.Helper()
	v, ok := As[T](src)
	if !ok {
		var zero T
		t.Fatalf("a %T source has no %T", src, &zero)
	}
	return v
}

// A source that does not implement what its type declared is refused at
// New: the declaration (define) and the code cannot drift apart.
func TestCheckCaps(t *testing.T) {
	tests := []struct {
		mask int
		caps Caps
		ok   bool
	}{
		{0, 0, true},
		{1, Watches, true},
		{15, Watches | ReportsThreads | ReadsDemand | Queries, true},
		{7, Watches | ReportsThreads | ReadsDemand, true},
		{1, Watches | ReportsThreads, false}, // declares threads, reads none
		{3, Watches, false},                  // reads threads, does not say so
		{8, 0, false},
	}
	for _, tc := range tests {
		err := checkCaps("fake", fakeOf(tc.mask, false), tc.caps)
		if (err == nil) != tc.ok {
			t.Errorf("interfaces %04b, declared %04b: err = %v, want ok %v", tc.mask, tc.caps, err, tc.ok)
		}
	}
}
