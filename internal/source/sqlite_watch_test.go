package source

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/flexiqdb"
)

// wakes counts a watch's wake-ups.
type wakes struct{ n atomic.Int64 }

func (w *wakes) wake() { w.n.Add(1) }

// after waits (up to a generous bound: the machine is noisy) for a wake-up
// beyond the count seen before, and says whether one came.
func (w *wakes) after(before int64) bool {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if w.n.Load() > before {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return false
}

// quiet says whether no wake-up beyond before came within d.
func (w *wakes) quiet(before int64, d time.Duration) bool {
	time.Sleep(d)
	return w.n.Load() == before
}

func watch(t *testing.T, s Source, w *wakes) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	how, err := mustAs[Watcher](t, s).Watch(ctx, w.wake)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	return how
}

func specOf(typ, path string) config.Source {
	if typ == TypeSQLiteQuery {
		return config.Source{Type: typ, Settings: SQLiteQuerySettings{Path: path, Query: countsQuery}}
	}
	return config.Source{Type: typ, Settings: FlexiqSQLiteSettings{Path: path}}
}

func enqueueOne(t *testing.T, path string) {
	t.Helper()
	db, err := flexiqdb.Create(path) // opens an existing database as is
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := flexiqdb.Enqueue(db, flexiqdb.Job{}); err != nil {
		t.Fatal(err)
	}
}

// A write through a writer that keeps the database open (as flexiq's
// workers do: the -wal stays) wakes the watch; the source's own reads do
// not, or every tick would cause the next.
func TestSQLiteWatchWAL(t *testing.T) {
	for _, typ := range []string{TypeFlexiqSQLite, TypeSQLiteQuery} {
		t.Run(typ, func(t *testing.T) {
			path, db := newDB(t)
			s := mustNew(t, specOf(typ, path))
			var w wakes
			how := watch(t, s, &w)
			for _, want := range []string{"inotify on " + path, path + "-wal", filepath.Dir(path)} {
				if !strings.Contains(how, want) {
					t.Errorf("Watch says %q, want it to name %q", how, want)
				}
			}
			for i := 0; i < 3; i++ {
				if _, err := s.Observe(context.Background(), time.Now()); err != nil {
					t.Fatal(err)
				}
			}
			if !w.quiet(0, 300*time.Millisecond) {
				t.Fatalf("the source's own reads woke it %d times", w.n.Load())
			}
			if err := flexiqdb.Enqueue(db, flexiqdb.Job{}); err != nil {
				t.Fatal(err)
			}
			if !w.after(0) {
				t.Fatal("an insert did not wake the watch")
			}
		})
	}
}

// With no writer holding the database, the reader's first Observe may create
// the -wal (one wake-up at most); after that, reads wake nothing.
func TestSQLiteWatchIdleReads(t *testing.T) {
	path, db := newDB(t)
	db.Close()
	s := mustNew(t, specOf(TypeFlexiqSQLite, path))
	var w wakes
	watch(t, s, &w)
	for i := 0; i < 2; i++ {
		if _, err := s.Observe(context.Background(), time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond)
	first := w.n.Load()
	if first > 1 {
		t.Fatalf("two reads of an idle database woke the watch %d times", first)
	}
	for i := 0; i < 3; i++ {
		if _, err := s.Observe(context.Background(), time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if !w.quiet(first, 300*time.Millisecond) {
		t.Fatalf("reads of an idle database keep waking the watch: %d", w.n.Load())
	}
	enqueueOne(t, path)
	if !w.after(first) {
		t.Fatal("an insert did not wake the watch")
	}
}

// In rollback-journal mode, commits write the database file itself.
func TestSQLiteWatchRollbackJournal(t *testing.T) {
	path := newRollbackDB(t)
	s := mustNew(t, specOf(TypeFlexiqSQLite, path))
	var w wakes
	watch(t, s, &w)
	enqueueOne(t, path)
	if !w.after(0) {
		t.Fatal("an insert did not wake the watch")
	}
}

// A database that is not there yet is watched once it appears, and one
// replaced by a rename is watched anew.
func TestSQLiteWatchCreatedAndReplaced(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "later.db")
	s := mustNew(t, specOf(TypeFlexiqSQLite, path))
	var w wakes
	watch(t, s, &w)

	db, err := flexiqdb.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if !w.after(0) {
		t.Fatal("creating the database did not wake the watch")
	}
	time.Sleep(100 * time.Millisecond)
	n := w.n.Load()
	if err := flexiqdb.Enqueue(db, flexiqdb.Job{}); err != nil {
		t.Fatal(err)
	}
	if !w.after(n) {
		t.Fatal("an insert into the new database did not wake the watch")
	}

	// Replace it: a new database renamed over the old one (as a restore
	// from a backup does), then written through a connection of its own.
	db.Close()
	tmp := filepath.Join(dir, "new.db")
	ndb, err := flexiqdb.Create(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ndb.Exec(`PRAGMA journal_mode = DELETE`); err != nil {
		t.Fatal(err)
	}
	ndb.Close()
	os.Remove(path + "-wal")
	os.Remove(path + "-shm")
	time.Sleep(100 * time.Millisecond)
	n = w.n.Load()
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	if !w.after(n) {
		t.Fatal("renaming a database into place did not wake the watch")
	}
	time.Sleep(100 * time.Millisecond)
	n = w.n.Load()
	enqueueOne(t, path) // rollback-journal mode: writes the file itself
	if !w.after(n) {
		t.Fatal("an insert into the renamed database did not wake the watch")
	}
}

func TestSQLiteWatchNoDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing", "q.db")
	s := mustNew(t, specOf(TypeSQLiteQuery, path))
	_, err := mustAs[Watcher](t, s).Watch(context.Background(), func() {})
	wantErrContaining(t, err, TypeSQLiteQuery, path, "inotify on directory", "no such file")
}

// After ctx ends, writes wake nothing.
func TestSQLiteWatchStops(t *testing.T) {
	path, db := newDB(t)
	s := mustNew(t, specOf(TypeFlexiqSQLite, path))
	var w wakes
	ctx, cancel := context.WithCancel(context.Background())
	if _, err := mustAs[Watcher](t, s).Watch(ctx, w.wake); err != nil {
		t.Fatal(err)
	}
	cancel()
	time.Sleep(100 * time.Millisecond)
	n := w.n.Load()
	if err := flexiqdb.Enqueue(db, flexiqdb.Job{}); err != nil {
		t.Fatal(err)
	}
	if !w.quiet(n, 300*time.Millisecond) {
		t.Fatal("a watch whose context ended still wakes")
	}
}
