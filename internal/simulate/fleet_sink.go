package simulate

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"

	"github.com/flexiq/flexiq-scaled/internal/fleet"
)

// fleetRow is one tick of the fleet; its key order is the jsonl line's.
type fleetRow struct {
	T       float64        `json:"t"`
	Pending *int64         `json:"pending"`
	Leader  string         `json:"leader"` // "" while no host leads
	Epoch   uint64         `json:"epoch"`
	Target  int            `json:"target"`   // the last plan's
	PlanAge float64        `json:"plan_age"` // seconds, on the store's clock
	Live    int            `json:"live"`     // the fleet's total
	Hosts   []fleetHostRow `json:"hosts"`
	Event   string         `json:"event,omitempty"`
	// Rationale is the leader's decision at this tick; "" with no leader.
	Rationale string `json:"rationale,omitempty"`
}

type fleetHostRow struct {
	ID       string      `json:"id"`
	Alive    bool        `json:"alive"`
	Capacity int         `json:"capacity"`
	Share    int         `json:"share"` // in the last plan
	Live     int         `json:"live"`
	Phase    fleet.Phase `json:"phase,omitempty"`
}

type fleetSink interface {
	write(fleetRow) error
	flush() error
}

func newFleetSink(format string, out io.Writer, hosts []*simHost) fleetSink {
	if format == FormatTable {
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprint(tw, "T\tPENDING\tLEADER\tEPOCH\tTARGET\tPLAN_AGE\tLIVE\t")
		for _, h := range hosts {
			fmt.Fprintf(tw, "%s(%d)\t", h.ID, h.Capacity)
		}
		fmt.Fprintln(tw, "EVENT")
		return fleetTable{tw}
	}
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	return fleetJSONL{enc}
}

type fleetJSONL struct{ enc *json.Encoder }

func (s fleetJSONL) write(r fleetRow) error { return s.enc.Encode(r) }
func (fleetJSONL) flush() error             { return nil }

// fleetTable shows each host as SHARE/LIVE and its phase ("down" when off).
type fleetTable struct{ tw *tabwriter.Writer }

func (s fleetTable) write(r fleetRow) error {
	leader := r.Leader
	if leader == "" {
		leader = "-"
	}
	line := fmt.Sprintf("%s\t%s\t%s\t%d\t%d\t%s\t%d\t", strconv.FormatFloat(r.T, 'f', -1, 64), count(r.Pending),
		leader, r.Epoch, r.Target, strconv.FormatFloat(r.PlanAge, 'f', -1, 64), r.Live)
	for _, h := range r.Hosts {
		phase := string(h.Phase)
		if !h.Alive {
			phase = "down"
		}
		line += fmt.Sprintf("%d/%d %s\t", h.Share, h.Live, phase)
	}
	event := r.Event
	if event == "" {
		event = "-"
	}
	_, err := fmt.Fprintln(s.tw, line+event)
	return err
}

func (s fleetTable) flush() error { return s.tw.Flush() }
