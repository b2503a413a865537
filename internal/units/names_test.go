package units_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// A pool name reaches a unit name only if the config accepts it, and then
// it round-trips: the unit list, the daemon's only record of its workers,
// reads back exactly the pool and slot that were started. A name the config
// refuses must not parse from any unit name either, so a unit made by hand
// with such a name is never taken for a worker.
func TestPoolNamesRoundTripOnlyWhenValid(t *testing.T) {
	names := []string{
		"email", "bulk_mail2", "0", strings.Repeat("a", 32),
		"", strings.Repeat("a", 33), "a/b", "..", ".", "a@b", "a\nb", "a-b", "-", "émail", "Email",
		"a b", "a.service", "a\x00b", "a\\x2db", "a%ib", "$x", "a:b", "a*", "a?", "[a]",
	}
	// Every single byte as a name too: only [a-z0-9_] may pass.
	for b := 0; b < 256; b++ {
		names = append(names, string([]byte{byte(b)}))
	}
	dir := t.TempDir()
	for i, name := range names {
		accepted := configAccepts(t, filepath.Join(dir, strconv.Itoa(i)+".toml"), name)
		for _, slot := range []int{0, 1, 42, 1 << 30} {
			unit := units.UnitName(name, slot)
			pool, got, ok := units.ParseUnitName(unit)
			if ok != accepted {
				t.Errorf("pool %q: config accepts it: %v; unit name %q parses: %v", name, accepted, unit, ok)
			}
			if ok && (pool != name || got != slot) {
				t.Errorf("%q parses as %q, %d; want %q, %d", unit, pool, got, name, slot)
			}
		}
	}
}

// configAccepts reports whether a config with a pool of that name loads,
// and that a refusal names the rule.
func configAccepts(t *testing.T, path, name string) bool {
	t.Helper()
	key := strconv.Quote(name) // a TOML basic string for the names used here
	if strings.ContainsRune(name, 0) {
		key = `"a\u0000b"`
	}
	text := "[pools." + key + "]\nexec = [\"/bin/true\"]\n[pools." + key + ".source]\npath = \"/var/lib/flexiq/q.db\"\n"
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := config.Load(path)
	var cerr *config.Error
	switch {
	case err == nil:
		return true
	case !errors.As(err, &cerr):
		t.Fatalf("pool %q: %v", name, err)
	case !strings.Contains(err.Error(), "pool name must match") && !strings.Contains(err.Error(), "line "):
		t.Errorf("pool %q refused for another reason: %v", name, err)
	}
	return false
}

// Slots as they appear in unit names that someone else may have made: only
// the decimal form UnitName writes parses.
func TestSlotsThatCouldInject(t *testing.T) {
	for _, slot := range []string{"", "-1", "+1", " 1", "1 ", "01", "0x1", "1e3", "1\n", "1/2", "..", "١", "1.0", "99999999999999999999", "1@2"} {
		unit := "flexiq-email@" + slot + ".service"
		if pool, n, ok := units.ParseUnitName(unit); ok {
			t.Errorf("ParseUnitName(%q) = %q, %d, true; want false", unit, pool, n)
		}
	}
}

func TestParseRankUnitName(t *testing.T) {
	for _, tc := range []struct {
		unit       string
		pool       string
		slot, rank int
		ok         bool
	}{
		{"flexiq-llm@4.service", "llm", 4, 0, true},
		{"flexiq-llm@4-r1.service", "llm", 4, 1, true},
		{"flexiq-llm@0-r12.service", "llm", 0, 12, true},
		{units.RankUnitName("a_b", 7, 3), "a_b", 7, 3, true},
		{"flexiq-llm@4-r0.service", "", 0, 0, false}, // rank 0 is UnitName's
		{"flexiq-llm@4-r01.service", "", 0, 0, false},
		{"flexiq-llm@4-r-1.service", "", 0, 0, false},
		{"flexiq-llm@4-r.service", "", 0, 0, false},
		{"flexiq-llm@04-r1.service", "", 0, 0, false},
		{"flexiq-llm@-r1.service", "", 0, 0, false},
		{"flexiq-llm@4-r1-r2.service", "", 0, 0, false},
		{"flexiq-llm@4-r1.slice", "", 0, 0, false},
		{"flexiq-l-m@4-r1.service", "", 0, 0, false},
		{"flexiq-llm@4_r1.service", "", 0, 0, false},
	} {
		pool, slot, rank, ok := units.ParseRankUnitName(tc.unit)
		if pool != tc.pool || slot != tc.slot || rank != tc.rank || ok != tc.ok {
			t.Errorf("ParseRankUnitName(%q) = %q, %d, %d, %v; want %q, %d, %d, %v", tc.unit, pool, slot, rank, ok, tc.pool, tc.slot, tc.rank, tc.ok)
		}
		// A rank unit is never taken for a slot of its own.
		if _, _, isSlot := units.ParseUnitName(tc.unit); isSlot && tc.rank != 0 {
			t.Errorf("ParseUnitName(%q) took a rank unit for a slot", tc.unit)
		}
	}
}
