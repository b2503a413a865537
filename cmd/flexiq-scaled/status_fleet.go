package main

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
)

// printFleet writes a fleet pool's coordination: the lease, the plan, and
// each host's share, live count and capacity.
func printFleet(w io.Writer, f *api.FleetView) {
	leader := "none"
	if f.Leader != "" {
		leader = api.ShortHostID(f.Leader)
		switch {
		case f.IsLeader:
			leader += " (this host)"
		case f.Leader == f.HostID:
			leader += " (this host's previous daemon, until its lease lapses)"
		}
	}
	store := api.Printable(f.Store)
	if !f.Reachable {
		store += " (not answering)"
	}
	fmt.Fprintf(w, "     Fleet: %s; leader %s, epoch %d; this host %s\n", store, leader, f.Epoch, api.ShortHostID(f.HostID))
	age := "no plan yet"
	if f.PlanAgeSec != nil {
		age = fmt.Sprintf("plan epoch %d, %s old", f.PlanEpoch, fmtDuration(time.Duration(*f.PlanAgeSec*float64(time.Second))))
	}
	fmt.Fprintf(w, "      Plan: fleet target %d, this host's share %d (%s); %s\n", f.Target, f.Share, f.Phase, age)
	if f.Error != "" {
		fmt.Fprintf(w, "Fleet error: %s\n", api.Printable(firstLine(f.Error)))
	}
	for _, h := range f.Hosts {
		live, capa := "?", "?"
		if h.Live >= 0 {
			live = strconv.Itoa(h.Live)
		}
		if h.Capacity >= 0 {
			capa = strconv.Itoa(h.Capacity)
		}
		me := ""
		if h.ID == f.HostID {
			me = " (this host)"
		}
		fmt.Fprintf(w, "      Host: %s share %d, live %s, capacity %s%s\n", api.ShortHostID(h.ID), h.Share, live, capa, me)
	}
	if f.MembersError != "" {
		fmt.Fprintf(w, "            (%s)\n", api.Printable(firstLine(f.MembersError)))
	}
}
