package harness

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Unit is one unit as systemd lists it.
type Unit struct {
	Name, Load, Active, Sub string
}

// Slot is a worker unit's slot number (flexiq-POOL@SLOT.service).
func (u Unit) Slot() int {
	at := strings.LastIndexByte(u.Name, '@')
	n, _ := strconv.Atoi(strings.TrimSuffix(u.Name[at+1:], ".service"))
	return n
}

// ListUnits lists the loaded units matching pattern, in any state, with
// systemctl (which waits for the bus if it restarts).
func (e *Env) ListUnits(pattern string) ([]Unit, error) {
	out, err := e.Try("systemctl", "list-units", "--all", "--plain", "--no-legend", pattern)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w\n%s", pattern, err, out)
	}
	return ParseUnits(out), nil
}

// ParseUnits reads `systemctl list-units --plain --no-legend`.
func ParseUnits(out string) []Unit {
	var us []Unit
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "●")); len(f) >= 4 {
			us = append(us, Unit{Name: f[0], Load: f[1], Active: f[2], Sub: f[3]})
		}
	}
	return us
}

// Workers lists the names of the pool's worker units ("*": every pool's)
// whose active state is one of states (none: any).
func (e *Env) Workers(pool string, states ...string) []string {
	e.T.Helper()
	us, err := e.ListUnits("flexiq-" + pool + "@*.service")
	if err != nil {
		e.T.Fatal(err)
	}
	var names []string
	for _, u := range us {
		if len(states) == 0 || slices.Contains(states, u.Active) {
			names = append(names, u.Name)
		}
	}
	return names
}

// FigureLine is a measurement in the greppable form the docs' tables are
// filled from: head ("FIGURE fault=NAME"), then the key=value pairs of kv,
// durations in seconds and floats with the given decimals.
//
//	go test -count=1 -v ./test/SUITE/ 2>&1 | grep FIGURE
func FigureLine(head string, decimals int, kv ...any) string {
	var b strings.Builder
	b.WriteString(head)
	for i := 0; i+1 < len(kv); i += 2 {
		v := kv[i+1]
		switch x := v.(type) {
		case time.Duration:
			v = strconv.FormatFloat(x.Seconds(), 'f', decimals, 64) + "s"
		case float64:
			v = strconv.FormatFloat(x, 'f', decimals, 64)
		}
		fmt.Fprintf(&b, " %v=%v", kv[i], v)
	}
	return b.String()
}
