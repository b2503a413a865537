package api

import (
	"slices"
	"time"
)

// Step is one input or stage of a decision. Held is set on a step that kept
// the pool from the count the steps before it asked for.
type Step struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	Held  bool   `json:"held,omitempty"`
	Note  string `json:"note,omitempty"`
}

// Explanation is one tick's decision as explain shows it.
type Explanation struct {
	Time      time.Time `json:"time"` // wall clock
	Action    string    `json:"action"`
	Current   int       `json:"current"`
	Desired   int       `json:"desired"`
	Mode      string    `json:"mode"`
	Rationale string    `json:"rationale"`
	Steps     []Step    `json:"steps"`
	// HeldBy names the step that had the last word in holding the pool
	// back ("" when nothing did).
	HeldBy string `json:"held_by,omitempty"`
}

// Clone is a copy that shares no steps with e, for a reader of a snapshot
// the controller goes on appending to.
func (e Explanation) Clone() Explanation {
	e.Steps = slices.Clone(e.Steps)
	return e
}

// Add appends a step; a held one becomes HeldBy, so that HeldBy always
// names the last step that held.
func (e *Explanation) Add(s Step) {
	e.Steps = append(e.Steps, s)
	if s.Held {
		e.HeldBy = s.Name
	}
}
