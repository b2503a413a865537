package source

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Inotify masks. A write to the database shows as IN_MODIFY on its -wal (WAL
// mode: every commit appends there) or on the file itself (rollback-journal
// mode, and checkpoints). Readers, this daemon included, never write either
// file (they map the -shm, which is not watched and whose mmap writes make no
// events anyway), so Observe cannot wake the pool that runs it. The
// directory is watched for the database or its -wal appearing, created or
// renamed into place (a database replaced by a rename, or a -wal that the
// first writer creates): the new file is then watched in turn.
const (
	fileEvents = unix.IN_MODIFY
	dirEvents  = unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_ONLYDIR
)

// watchSQLite watches path and path-wal with inotify and calls wake after
// every batch of writes to either, until ctx ends. It fails only if the
// database's directory cannot be watched (missing, or out of inotify
// instances or watches); a database or -wal that is not there yet is
// watched once it appears.
//
// inotify_init1, inotify_add_watch and inotify_rm_watch are in systemd's
// @file-system set, part of the @system-service filter of the daemon's unit,
// and need no capability; inotify sees writes made through any path or mount
// of the same inode, so a database shown to the daemon through a bind mount
// is watched as well. It does not see writes made on another host to a
// database on a network file system: polling remains the fallback there.
func watchSQLite(ctx context.Context, kind, path string, wake func()) (string, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return "", fmt.Errorf("%s source %s: inotify: %w", kind, path, err)
	}
	// A non-blocking descriptor in an *os.File is read through the runtime's
	// poller, so that Close (when ctx ends) interrupts a pending Read.
	f := os.NewFile(uintptr(fd), "inotify")
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	w := &sqliteWatch{fd: fd, dir: dir, names: map[string]int{}, wds: map[int]string{}}
	if w.dirWd, err = unix.InotifyAddWatch(fd, dir, dirEvents); err != nil {
		f.Close()
		return "", fmt.Errorf("%s source %s: inotify on directory %s: %w", kind, path, dir, err)
	}
	for _, name := range []string{base, base + "-wal"} {
		w.names[name] = -1
		if err := w.add(name); err != nil && !errors.Is(err, unix.ENOENT) {
			f.Close()
			return "", fmt.Errorf("%s source %s: inotify on %s: %w", kind, path, filepath.Join(dir, name), err)
		}
	}
	var once sync.Once
	closeFile := func() { once.Do(func() { f.Close() }) }
	go func() {
		<-ctx.Done()
		closeFile()
	}()
	go func() {
		defer closeFile()
		// A panic in the event parsing ends this watch, not the daemon:
		// the pool polls, and the journal says why.
		defer func() {
			if v := recover(); v != nil {
				err := recoverIn(ctx, kind, "the inotify watch", v)
				if ev := WatchEventsOf(ctx); ev.Lost != nil {
					ev.Lost(err)
				}
			}
		}()
		w.run(f, wake)
	}()
	return fmt.Sprintf("inotify on %s, %s-wal and directory %s", path, path, dir), nil
}

// sqliteWatch is one database's inotify instance.
type sqliteWatch struct {
	fd    int
	dir   string
	dirWd int
	names map[string]int // watched base name -> its wd, -1 while it does not exist
	wds   map[int]string
}

// add (re)watches the file name in the directory. A file replaced by a
// rename is a new inode, with a new watch descriptor: the old one is dropped.
func (w *sqliteWatch) add(name string) error {
	wd, err := unix.InotifyAddWatch(w.fd, filepath.Join(w.dir, name), fileEvents)
	if err != nil {
		return err
	}
	if old := w.names[name]; old >= 0 && old != wd {
		unix.InotifyRmWatch(w.fd, uint32(old))
		delete(w.wds, old)
	}
	w.names[name], w.wds[wd] = wd, name
	return nil
}

// run reads events until the descriptor is closed, and wakes once per read:
// a batch of events is one wake-up.
func (w *sqliteWatch) run(f *os.File, wake func()) {
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n, err := f.Read(buf)
		if err != nil {
			return // closed: ctx ended
		}
		if w.handle(buf[:n]) {
			wake()
		}
	}
}

// handle processes one read's events and says whether work may have arrived.
func (w *sqliteWatch) handle(buf []byte) bool {
	woke := false
	for off := 0; off+unix.SizeofInotifyEvent <= len(buf); {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
		nameBytes := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
		off += unix.SizeofInotifyEvent + int(ev.Len)
		wd, mask := int(ev.Wd), ev.Mask
		switch {
		case mask&unix.IN_Q_OVERFLOW != 0:
			// Events were lost: one of them may have been a write.
			woke = true
		case wd == w.dirWd:
			name := strings.TrimRight(string(nameBytes), "\x00")
			if _, ours := w.names[name]; ours && mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0 {
				// A file that vanished again before the watch is no loss:
				// its successor will make an event of its own.
				w.add(name)
				woke = true
			}
		case mask&unix.IN_IGNORED != 0:
			// The file was deleted (or its watch replaced by add).
			if name, ok := w.wds[wd]; ok {
				delete(w.wds, wd)
				if w.names[name] == wd {
					w.names[name] = -1
				}
			}
		case mask&unix.IN_MODIFY != 0:
			woke = true
		}
	}
	return woke
}
