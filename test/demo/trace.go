package main

import (
	"bytes"
	_ "embed"
	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"
)

// The trace window is compiled in, so the demo binary needs nothing from the
// checkout but the .deb and the test worker. README.md next to it says where
// it comes from and under which licence.
//
//go:embed azure-llm-code-2023-window.csv
var windowCSV []byte

// Attribution is required by the trace's licence (CC-BY 4.0) wherever its
// data are shown, so the demo prints it in its header.
const Attribution = "Trace: Azure LLM inference trace 2023 (code), CC-BY 4.0; Patel et al., Splitwise, ISCA 2024"

// arrival is one job of the trace.
type arrival struct {
	At        time.Time // arrival, trace time (UTC)
	Context   int       // prompt tokens
	Generated int       // generated tokens: what the job's service time comes from
}

// traceTimeLayout parses the trace's "2023-11-16 18:25:40.0684750" (UTC,
// up to 7 fractional digits).
const traceTimeLayout = "2006-01-02 15:04:05.9999999"

// parseTrace reads TIMESTAMP,ContextTokens,GeneratedTokens rows, in any
// column order, and returns them sorted by arrival.
func parseTrace(r io.Reader) ([]arrival, error) {
	cr := csv.NewReader(r)
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("trace header: %w", err)
	}
	col := map[string]int{}
	for i, h := range header {
		col[h] = i
	}
	for _, want := range []string{"TIMESTAMP", "ContextTokens", "GeneratedTokens"} {
		if _, ok := col[want]; !ok {
			return nil, fmt.Errorf("trace: no %s column in header %v", want, header)
		}
	}
	var out []arrival
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("trace: %w", err)
		}
		at, err := time.Parse(traceTimeLayout, rec[col["TIMESTAMP"]])
		if err != nil {
			return nil, fmt.Errorf("trace line %d: %w", line, err)
		}
		ctxTok, err1 := strconv.Atoi(rec[col["ContextTokens"]])
		gen, err2 := strconv.Atoi(rec[col["GeneratedTokens"]])
		if err1 != nil || err2 != nil || ctxTok < 0 || gen < 0 {
			return nil, fmt.Errorf("trace line %d: bad token counts %q", line, rec)
		}
		out = append(out, arrival{At: at, Context: ctxTok, Generated: gen})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("trace: no rows")
	}
	slices.SortStableFunc(out, func(a, b arrival) int { return a.At.Compare(b.At) })
	return out, nil
}

func loadWindow() ([]arrival, error) { return parseTrace(bytes.NewReader(windowCSV)) }

// replay maps the trace onto the wall clock: both the gaps between arrivals
// and the jobs' service times are divided by Speedup, so the load (busy
// threads at any instant) is the trace's own, only played faster.
type replay struct {
	Speedup    float64
	BaseMs     float64 // fixed cost of a job, trace time
	PerTokenMs float64 // cost per generated token, trace time
	// LeadIn is wall time replayed before the first arrival, so the
	// timeline starts from an idle pool.
	LeadIn time.Duration
}

// Origin is the trace instant replayed at wall offset zero.
func (r replay) Origin(trace []arrival) time.Time {
	return trace[0].At.Add(-time.Duration(float64(r.LeadIn) * r.Speedup))
}

// Offset is when, after the start of the replay, a job arrives.
func (r replay) Offset(trace []arrival, a arrival) time.Duration {
	return time.Duration(float64(a.At.Sub(r.Origin(trace))) / r.Speedup)
}

// TraceTime is the trace instant shown at wall offset d.
func (r replay) TraceTime(trace []arrival, d time.Duration) time.Time {
	return r.Origin(trace).Add(time.Duration(float64(d) * r.Speedup))
}

// ServiceMs is how long the test worker works on a job, in wall
// milliseconds: (base + per-token × generated tokens) / speedup, at least 1.
func (r replay) ServiceMs(a arrival) int {
	return max(1, int((r.BaseMs+r.PerTokenMs*float64(a.Generated))/r.Speedup+0.5))
}

// Duration is the replay's wall time from start to the last arrival.
func (r replay) Duration(trace []arrival) time.Duration {
	return r.Offset(trace, trace[len(trace)-1])
}
