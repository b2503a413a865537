package replicas

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
)

// Issue 27, item 6: at start a service pool reads back the units its
// discovery file listed. A FIFO put there must not block the pool (it is
// no list: none is adopted as ready), nor a link be followed to another
// pool's file.
func TestListedUnitsNotRegular(t *testing.T) {
	dir := t.TempDir()
	other := filepath.Join(dir, "other.json")
	if err := os.WriteFile(other, []byte(`{"schema":1,"pool":"other","replicas":[{"unit":"flexiq-other@1.service"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		make func(path string) error
	}{
		{"FIFO", func(p string) error { return syscall.Mkfifo(p, 0o644) }},
		{"symbolic link", func(p string) error { return os.Symlink(other, p) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sub := t.TempDir()
			if err := tc.make(filepath.Join(sub, "web.json")); err != nil {
				t.Fatal(err)
			}
			cfg := &config.Pool{Name: "web", Service: &config.Service{DiscoveryDir: sub}}
			done := make(chan map[string]bool, 1)
			go func() { done <- ListedUnits(cfg) }()
			select {
			case got := <-done:
				if len(got) != 0 {
					t.Errorf("read %v through a %s", got, tc.name)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("ListedUnits still blocked after 5s")
			}
		})
	}
}
