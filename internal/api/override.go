package api

import (
	"errors"
	"fmt"
	"time"
)

// Override kinds.
const (
	OverrideNone   = ""
	OverridePaused = "paused"
	OverridePinned = "pinned"
)

// Override is an operator's pause or pin of a pool. It is also the body of
// the pool's override file in the state directory (see the controller), so
// its JSON names are a file format as well as a wire format.
type Override struct {
	Kind string `json:"kind"` // OverridePaused or OverridePinned; "" for none (resume, unpin)
	// Workers is the pinned count (OverridePinned only).
	Workers int `json:"workers,omitempty"`
	// Since is when it was set; Until when it ends by itself (zero: never).
	// Both on the wall clock.
	Since time.Time `json:"since"`
	Until time.Time `json:"until,omitzero"`
	// By names who set it ("uid 1000 (alice)"), for the journal and status.
	By string `json:"by,omitempty"`
}

// Active says whether the override is in force at wall-clock time now.
func (o Override) Active(now time.Time) bool {
	return o.Kind != OverrideNone && (o.Until.IsZero() || now.Before(o.Until))
}

// String is the override as status and STATUS= show it.
func (o Override) String() string {
	s := o.Kind
	if o.Kind == OverridePinned {
		s = fmt.Sprintf("pinned at %d", o.Workers)
	}
	if !o.Until.IsZero() {
		s += " until " + o.Until.Local().Format("15:04:05")
	}
	return s
}

// ErrOverride marks an override the pool refuses (a pin outside 0..max_workers).
var ErrOverride = errors.New("invalid override")
