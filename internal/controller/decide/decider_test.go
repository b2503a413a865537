package decide

import (
	"errors"
	"io"
	"testing"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/fleet"
)

// TestReloadKeepsTheMemory: a reload swaps the decider, local or a
// fleet's, but the pipeline's memory is the pool's and goes on; a fleet
// that cannot open its store leaves the decider as it was.
func TestReloadKeepsTheMemory(t *testing.T) {
	log := eventlog.New(io.Discard)
	refused := errors.New("refused")
	o := Options{Log: log, OpenFleetStore: func(config.Fleet) (fleet.Store, error) { return nil, refused }}
	local := &config.Pool{Name: "p", MaxWorkers: 4}
	joins := &config.Pool{Name: "p", MaxWorkers: 4, Fleet: &config.PoolFleet{Capacity: 2}}

	d, err := New(local, nil, o)
	if err != nil {
		t.Fatal(err)
	}
	mem := d.Memory()
	if FleetOf(d) != nil || d.View() != nil || d.Summary() != "" {
		t.Fatalf("a local pool's decider is a fleet's: %T", d)
	}
	if _, err := New(joins, nil, o); !errors.Is(err, refused) {
		t.Errorf("New of a fleet pool whose store refuses: err %v, want %v", err, refused)
	}
	next, err := Reload(d, joins, nil, o)
	if !errors.Is(err, refused) || next != d {
		t.Errorf("Reload into a fleet whose store refuses = %T, %v; want the old decider and %v", next, err, refused)
	}
	next, err = Reload(d, &config.Pool{Name: "p", MaxWorkers: 8}, nil, o)
	if err != nil || next.Memory() != mem {
		t.Errorf("Reload of a local pool = %T, %v; want its own memory", next, err)
	}
}
