package daemon

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
)

// A max_workers above what the host holds is capped, with an event naming
// the pool, the value written and the cap.
func TestApplyCapacityCapsAndLogs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.toml")
	text := `[pools.big]
exec = ["/bin/w"]
min_workers = 1
max_workers = 100000
[pools.big.source]
path = "/q.db"
[pools.big.limits]
cpu_quota = "100%"

[pools.free]
exec = ["/bin/w"]
max_workers = 100000
[pools.free.source]
path = "/q.db"
`
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	budget := applyCapacity(eventlog.NewWriter(&buf), cfg)
	if got, want := cfg.Pools["big"].MaxWorkers, runtime.NumCPU(); got != want {
		t.Errorf("big max_workers = %d, want %d (one per CPU)", got, want)
	}
	if got := cfg.Pools["free"].MaxWorkers; got != 100000 {
		t.Errorf("free max_workers = %d: a pool without limits is not capped", got)
	}
	if !strings.Contains(buf.String(), "pool=big max_workers = 100000 is above capacity") || strings.Contains(buf.String(), "pool=free") {
		t.Errorf("log:\n%s", buf.String())
	}
	if budget.Cores != float64(runtime.NumCPU()) || budget.Memory == 0 || budget.Workers != 0 {
		t.Errorf("budget %+v", budget)
	}
}
