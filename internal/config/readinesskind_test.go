package config

import (
	"slices"
	"strings"
	"testing"
)

// TestReadinessKindsDocumented holds the kinds' declarations (readinessKinds)
// to the reference: every kind listed as a value of type, every key a kind
// takes documented, and a probe kind able to read and write its keys.
func TestReadinessKindsDocumented(t *testing.T) {
	documented := readinessKeys.Names()
	typeDoc := readinessKeys.Keys[slices.Index(documented, "type")]
	for _, k := range readinessKinds {
		if !strings.Contains(typeDoc.Limits, "`\""+k.name+"\"`") {
			t.Errorf("kind %q: not among type's values in the reference (%s)", k.name, typeDoc.Limits)
		}
		for _, key := range k.keys {
			if !slices.Contains(documented, key) {
				t.Errorf("kind %q takes %s, which readinessKeys does not document", k.name, key)
			}
		}
		if k.probe != (k.decode != nil) || k.probe != (k.effective != nil) {
			t.Errorf("kind %q: a probe kind declares decode and effective, another neither", k.name)
		}
		if !k.probe && len(k.keys) > 0 {
			t.Errorf("kind %q takes keys %v but is no probe: they would never be read", k.name, k.keys)
		}
	}
}
