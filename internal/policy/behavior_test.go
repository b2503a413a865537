package policy

import (
	"strings"
	"testing"
	"time"
)

func TestLimit(t *testing.T) {
	t0 := time.Unix(10_000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	p := Params{MinWorkers: 1, MaxWorkers: 100}
	// The issue's example: up at most 4 workers per 15 s; down at most 1
	// worker per 60 s.
	issue := Behavior{
		Up:   DirectionBehavior{Policies: []RateLimit{{LimitWorkers, 4, 15 * time.Second}}},
		Down: DirectionBehavior{Policies: []RateLimit{{LimitWorkers, 1, 60 * time.Second}}},
	}
	hpaDefaultUp := Behavior{Up: DirectionBehavior{Select: SelectMax, Policies: []RateLimit{
		{LimitPercent, 100, 15 * time.Second}, {LimitWorkers, 4, 15 * time.Second}}}}
	minUp := hpaDefaultUp
	minUp.Up.Select = SelectMin
	pctDown := Behavior{Down: DirectionBehavior{Policies: []RateLimit{{LimitPercent, 50, 60 * time.Second}}}}
	n8n := Behavior{Cooldown: 90 * time.Second}
	perDir := Behavior{Up: DirectionBehavior{Cooldown: 30 * time.Second}, Down: DirectionBehavior{Cooldown: 300 * time.Second}}
	disabled := Behavior{Down: DirectionBehavior{Select: SelectDisabled}}

	tests := []struct {
		name    string
		b       Behavior
		events  []ScaleEvent
		now     int
		current int
		desired int
		want    int
		note    string
	}{
		{"no behaviour limits nothing", Behavior{}, nil, 0, 2, 50, 50, ""},
		{"up 4 per 15 s", issue, nil, 0, 2, 50, 6, "scale_up rate limit: 6"},
		{"up: what was added in the period counts", issue, []ScaleEvent{{at(0), 3}}, 10, 5, 50, 6, "scale_up rate limit"},
		{"up: a new period allows 4 again", issue, []ScaleEvent{{at(0), 4}}, 15, 6, 50, 10, "scale_up rate limit"},
		{"up: within the limit untouched", issue, nil, 0, 2, 5, 5, ""},
		{"down 1 per 60 s", issue, nil, 0, 10, 2, 9, "scale_down rate limit: 9"},
		{"down: the period's removal used it up", issue, []ScaleEvent{{at(0), -1}}, 59, 9, 2, 9, "scale_down rate limit"},
		{"down: next period", issue, []ScaleEvent{{at(0), -1}}, 60, 9, 2, 8, "scale_down rate limit"},
		{"down: a scale-up in the period raises its start", issue, []ScaleEvent{{at(0), 3}}, 10, 8, 2, 4, "scale_down rate limit"},
		{"max select takes the larger allowance", hpaDefaultUp, nil, 0, 10, 50, 20, "rate limit: 20"},
		{"max select, small pool: 4 workers beat 100%", hpaDefaultUp, nil, 0, 1, 50, 5, "rate limit: 5"},
		{"min select takes the smaller", minUp, nil, 0, 10, 50, 14, "rate limit: 14"},
		{"percent up rounds up", Behavior{Up: DirectionBehavior{Policies: []RateLimit{{LimitPercent, 10, time.Minute}}}}, nil, 0, 3, 50, 4, "rate limit: 4"},
		{"percent down rounds down", pctDown, nil, 0, 5, 1, 2, "rate limit: 2"},
		{"cooldown after any action", n8n, []ScaleEvent{{at(0), 1}}, 89, 3, 2, 3, "cooldown_sec 1m30s: last action 1m29s ago"},
		{"cooldown over", n8n, []ScaleEvent{{at(0), 1}}, 90, 3, 2, 2, ""},
		{"cooldown holds a scale-up too", n8n, []ScaleEvent{{at(0), -1}}, 10, 3, 4, 3, "cooldown_sec"},
		{"up cooldown does not hold a scale-down", perDir, []ScaleEvent{{at(0), 1}}, 10, 3, 2, 2, ""},
		{"up cooldown holds a scale-up", perDir, []ScaleEvent{{at(0), 1}}, 10, 3, 5, 3, "scale_up cooldown_sec 30s"},
		{"down cooldown holds a scale-down", perDir, []ScaleEvent{{at(0), -1}, {at(100), 2}}, 200, 5, 3, 5, "scale_down cooldown_sec 5m0s: last scale_down 3m20s ago"},
		{"disabled direction", disabled, nil, 0, 5, 1, 5, "scale_down disabled"},
		{"min_workers wins over a cooldown", n8n, []ScaleEvent{{at(0), -1}}, 10, 0, 1, 1, ""},
		{"max_workers wins over a disabled scale-down", Behavior{Down: DirectionBehavior{Select: SelectDisabled}}, nil, 0, 120, 100, 100, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var l Limiter
			l.Restore(at(tt.now), tt.events)
			action := ScaleUp
			if tt.desired < tt.current {
				action = ScaleDown
			}
			d := Decision{Now: at(tt.now), Action: action, Current: tt.current, Desired: tt.desired, Rationale: "r"}
			got, note := l.Limit(at(tt.now), tt.b, p, d)
			if got.Desired != tt.want {
				t.Errorf("Limit: %d -> %d gave %d, want %d (%s)", tt.current, tt.desired, got.Desired, tt.want, got.Rationale)
			}
			if !strings.Contains(note, tt.note) || (tt.note == "" && note != "") {
				t.Errorf("note %q, want one containing %q", note, tt.note)
			}
			if got.Desired == got.Current && got.Action != Stable {
				t.Errorf("action %s for a held decision, want stable", got.Action)
			}
		})
	}
}

func TestLimiterRecordKeepsWhatCooldownsNeed(t *testing.T) {
	t0 := time.Unix(10_000, 0)
	b := Behavior{Up: DirectionBehavior{Policies: []RateLimit{{LimitWorkers, 1, 10 * time.Second}}}}
	var l Limiter
	l.Record(t0, b, 1, 2)
	l.Record(t0.Add(time.Second), b, 2, 1)
	l.Record(t0.Add(2*time.Second), b, 1, 2)
	l.Record(t0.Add(time.Hour), b, 2, 2) // nothing changes; prunes
	ev := l.Events()
	// The old events are out of every period, but the last of each
	// direction stays: cooldowns are measured from them.
	if len(ev) != 2 || ev[0].Change != -1 || ev[1].Change != 1 {
		t.Errorf("events after pruning = %+v, want the last down and the last up", ev)
	}
	l.Restore(t0, []ScaleEvent{{t0.Add(time.Second), 1}, {t0, 0}, {t0, 2}})
	if ev := l.Events(); len(ev) != 1 || ev[0].Change != 2 {
		t.Errorf("Restore kept %+v, want only the past non-zero event", ev)
	}
}
