package admit

import (
	"reflect"
	"testing"
)

func TestNotActive(t *testing.T) {
	req := []string{"postgresql.service", "n8n.service", "srv.mount"}
	cases := []struct {
		name   string
		states map[string]string
		want   []string
	}{
		{"all active", map[string]string{"postgresql.service": "active", "n8n.service": "active", "srv.mount": "active"}, nil},
		{"reloading serves", map[string]string{"postgresql.service": "reloading", "n8n.service": "active", "srv.mount": "active"}, nil},
		{"one starting", map[string]string{"postgresql.service": "activating", "n8n.service": "active", "srv.mount": "active"},
			[]string{"postgresql.service (activating)"}},
		{"failed and missing, in the order required", map[string]string{"n8n.service": "failed", "postgresql.service": "active"},
			[]string{"n8n.service (failed)", "srv.mount (unknown)"}},
		{"stopping", map[string]string{"postgresql.service": "deactivating", "n8n.service": "inactive", "srv.mount": "active"},
			[]string{"postgresql.service (deactivating)", "n8n.service (inactive)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := notActive(req, tc.states); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("notActive = %q, want %q", got, tc.want)
			}
		})
	}
}
