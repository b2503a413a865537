// Package tickcsv is a `simulate --workload` run's ticks as CSV: what
// `simulate --svg` hands the flexiq-scaled-plot helper to draw. It is a leaf
// package of its own, so that the helper links neither the workload model
// nor its service expressions (expr-lang: 1.7 MB of the helper's binary).
package tickcsv

import (
	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"strconv"
)

// Row is a tick's fields that a picture draws (workload.Tick's T, Pending,
// Running, Current and Draining).
type Row struct {
	T                                float64
	Pending, Running, Live, Draining int
}

// Header is the CSV's header.
var Header = []string{"t", "pending", "running", "live", "draining"}

// Write writes rows as CSV, after the header.
func Write(w io.Writer, rows []Row) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(Header); err != nil {
		return err
	}
	for _, t := range rows {
		if err := cw.Write([]string{strconv.FormatFloat(t.T, 'f', -1, 64), strconv.Itoa(t.Pending),
			strconv.Itoa(t.Running), strconv.Itoa(t.Live), strconv.Itoa(t.Draining)}); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// Read reads what Write wrote.
func Read(r io.Reader) ([]Row, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = len(Header)
	head, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("ticks CSV header: %w", err)
	}
	if !slices.Equal(head, Header) {
		return nil, fmt.Errorf("ticks CSV header %q, want %q", head, Header)
	}
	var rows []Row
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			return rows, nil
		}
		if err != nil {
			return nil, fmt.Errorf("ticks CSV: %w", err)
		}
		var t Row
		t.T, err = strconv.ParseFloat(rec[0], 64)
		for i, p := range []*int{&t.Pending, &t.Running, &t.Live, &t.Draining} {
			if err == nil {
				*p, err = strconv.Atoi(rec[i+1])
			}
		}
		if err != nil {
			line, _ := cr.FieldPos(0)
			return nil, fmt.Errorf("ticks CSV line %d: %w", line, err)
		}
		rows = append(rows, t)
	}
}
