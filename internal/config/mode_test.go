package config

import (
	"slices"
	"strings"
	"testing"
)

func TestMode(t *testing.T) {
	for _, tc := range []struct{ line, want, problem string }{
		{"", ModeActive, ""},
		{`mode = "active"`, ModeActive, ""},
		{`mode = "dry-run"`, ModeDryRun, ""},
		{`mode = "dryrun"`, "", `pools.email.mode: unknown mode "dryrun"`},
		{`mode = 1`, "", "pools.email.mode"},
	} {
		c, err := load(t, pool(tc.line))
		if tc.problem != "" {
			if err == nil || !strings.Contains(err.Error(), tc.problem) {
				t.Errorf("%q: %v, want %q", tc.line, err, tc.problem)
			}
			continue
		}
		if err != nil || c.Pools["email"].Mode != tc.want {
			t.Errorf("%q: %v, mode %q", tc.line, err, c.Pools["email"].Mode)
		}
	}
	// A reload that switches the mode reports it.
	a, _ := load(t, pool(""))
	b, _ := load(t, pool(`mode = "dry-run"`))
	if keys := Diff(a.Pools["email"], b.Pools["email"]); !slices.Equal(keys, []string{"mode"}) {
		t.Errorf("Diff: %q, want [mode]", keys)
	}
}
