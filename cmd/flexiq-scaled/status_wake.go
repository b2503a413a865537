package main

import (
	"fmt"

	"github.com/flexiq/flexiq-scaled/internal/api"
)

// wakeLine is a wake address as status shows it (issue 29): where, how,
// and what it holds.
func wakeLine(wv *api.WakeView) string {
	s := fmt.Sprintf("%s (%s): %d held, %d forwarding; %d wake requests", api.Printable(wv.Address), api.Printable(wv.Mode), wv.Held, wv.Forwarding, wv.Requests)
	if wv.Holding {
		s += "; holding the pool at 1 at least"
	}
	if wv.Accepted > 0 {
		s += fmt.Sprintf("; since the wake process started: %d accepted, %d forwarded, %d answered 503", wv.Accepted, wv.Forwarded, wv.Rejected)
	}
	return s
}
