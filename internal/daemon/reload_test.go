package daemon

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
)

// reloadLoop runs the signal loop of a daemon whose configuration file is
// path. The loop is left running: it only returns through a stop, which
// would need a service manager. Only rejected files are reloaded here, so
// nothing reaches one.
func reloadLoop(t *testing.T, path string) (*daemon, chan<- os.Signal) {
	d := &daemon{
		opts: Options{ConfigPath: path}, log: eventlog.NewWriter(io.Discard),
		cfg: &config.Config{}, pools: map[string]*runningPool{}, removed: map[string]*removal{},
		statusKick: make(chan struct{}, 1),
		reloads:    make(chan reloadAsk), loopDone: make(chan struct{}),
	}
	sigs := make(chan os.Signal, 4)
	go d.serveSignals(context.Background(), sigs, false)
	return d, sigs
}

func writeConfig(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Every request is answered by a reload that read the file after the
// request was made, however many come at once.
func TestReloadReadsTheFileAfterTheRequest(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.toml")
	writeConfig(t, path, "first_unknown_key = 1\n")
	d, _ := reloadLoop(t, path)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := d.Reload(ctx)
	if err != nil || v.OK || !strings.Contains(strings.Join(v.Problems, "\n"), "first_unknown_key") {
		t.Fatalf("first verdict: %+v, %v", v, err)
	}
	writeConfig(t, path, "second_unknown_key = 1\n")
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := d.Reload(ctx)
			problems := strings.Join(v.Problems, "\n")
			if err != nil || v.OK || !strings.Contains(problems, "second_unknown_key") || !strings.Contains(problems, path) {
				t.Errorf("verdict of a request made after the change: %+v, %v", v, err)
			}
		}()
	}
	wg.Wait()
}

// A plain SIGHUP reloads too; an asker that leaves does not hold the loop.
func TestReloadBySIGHUPAndAbandonedAsk(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.toml")
	writeConfig(t, path, "x = 1\n")
	d, sigs := reloadLoop(t, path)
	sigs <- syscall.SIGHUP
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := d.Reload(gone); err == nil {
		t.Error("an ask whose context had ended got a verdict")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if v, err := d.Reload(ctx); err != nil || v.OK {
		t.Errorf("after SIGHUP: %+v, %v", v, err)
	}
}

// A reload asked of a daemon whose loop has ended is refused at once.
func TestReloadAfterTheLoop(t *testing.T) {
	d := &daemon{reloads: make(chan reloadAsk), loopDone: make(chan struct{})}
	close(d.loopDone)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := d.Reload(ctx); err == nil || !strings.Contains(err.Error(), "stopping") || ctx.Err() != nil {
		t.Errorf("err = %v after %v", err, ctx.Err())
	}
}
