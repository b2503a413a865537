package hostcheck

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flexiq/flexiq-scaled/internal/config"
)

func TestCheckCPUSet(t *testing.T) {
	c, err := load(t, svc("[pools.email.service]\ngroup_size = 2\ncpuset_split = true\n"))
	if err != nil {
		t.Fatal(err)
	}
	saved := cgroupRoot
	defer func() { cgroupRoot = saved }()
	for _, tc := range []struct {
		name, dir, controllers string // "" = no file
		want                   string
	}{
		{"cpuset", "", "cpuset cpu io memory pids\n", ""},
		{"no cpuset", "", "cpu io memory pids\n", "has no cpuset controller"},
		{"hybrid", "unified", "\n", "unified/cgroup.controllers lists: )"},
		{"no cgroup2", "", "", "cannot read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cgroupRoot = t.TempDir()
			if tc.controllers != "" {
				if err := os.MkdirAll(filepath.Join(cgroupRoot, tc.dir), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(cgroupRoot, tc.dir, "cgroup.controllers"), []byte(tc.controllers), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			ws := CheckCPUSet(c)
			if tc.want == "" {
				if len(ws) != 0 {
					t.Errorf("warnings %v", ws)
				}
				return
			}
			if len(ws) != 1 || ws[0].Key != "pools.email.service.cpuset_split" || ws[0].File != c.Path || !strings.Contains(ws[0].Msg, tc.want) {
				t.Errorf("warnings %v, want one on cpuset_split saying %q", ws, tc.want)
			}
		})
	}
	// The daemon sees it at start and reload, through CheckMachine.
	cgroupRoot = t.TempDir()
	if _, ws := CheckMachine(c); !slices.ContainsFunc(ws, func(p config.Problem) bool { return p.Key == "pools.email.service.cpuset_split" }) {
		t.Errorf("CheckMachine warnings %v lack cpuset_split", ws)
	}
	// A pool that does not split is not judged.
	c.Pools["email"].Service.CPUSetSplit = false
	cgroupRoot = t.TempDir()
	if ws := CheckCPUSet(c); ws != nil {
		t.Errorf("warnings without cpuset_split: %v", ws)
	}
}
