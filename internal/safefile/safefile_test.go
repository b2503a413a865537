package safefile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	regular := filepath.Join(dir, "regular")
	if err := os.WriteFile(regular, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		make func(p string) error
		want string // "" opens
	}{
		{"regular", func(p string) error { return os.WriteFile(p, nil, 0o644) }, ""},
		{"symbolic link to a regular file", func(p string) error { return os.Symlink(regular, p) }, "is a symbolic link, not a regular file"},
		{"dangling link", func(p string) error { return os.Symlink(filepath.Join(dir, "none"), p) }, "is a symbolic link"},
		{"FIFO", func(p string) error { return syscall.Mkfifo(p, 0o644) }, "is a named pipe (FIFO), not a regular file"},
		{"directory", func(p string) error { return os.Mkdir(p, 0o755) }, "is a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_"))
			if err := tc.make(p); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				f, _, err := Open(p)
				if err == nil {
					f.Close()
				}
				done <- err
			}()
			var err error
			select {
			case err = <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("Open still blocked after 5s")
			}
			var nr *NotRegularError
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Open: %v", err)
			case tc.want != "" && (!errors.As(err, &nr) || !strings.Contains(err.Error(), p+" "+tc.want)):
				t.Errorf("Open: %v, want a *NotRegularError %q", err, p+" "+tc.want)
			}
		})
	}
	if _, _, err := Open("/dev/null"); err == nil || err.Error() != "/dev/null is a device, not a regular file" {
		t.Errorf("/dev/null: %v, want it named a device", err)
	}
	if _, _, err := Open(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing: %v, want fs.ErrNotExist", err)
	}
}

func TestRead(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		limit int64
		want  string
	}{{10, ""}, {100, ""}, {9, "holds more than 9 bytes"}} {
		b, _, err := Read(p, tc.limit)
		var tl *TooLargeError
		switch {
		case tc.want == "" && (err != nil || string(b) != "0123456789"):
			t.Errorf("limit %d: %q, %v", tc.limit, b, err)
		case tc.want != "" && (!errors.As(err, &tl) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("limit %d: %v, want %q", tc.limit, err, tc.want)
		}
	}
}

func TestSize(t *testing.T) {
	for n, want := range map[int64]string{4 << 20: "4 MiB", 64 << 10: "64 KiB", 1000: "1000 bytes", 1<<20 + 1: "1048577 bytes"} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestWriteFaults(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give the file away")
	}
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mode os.FileMode
		uid  int
		euid int
		want string
	}{
		{0o644, 0, 0, ""},
		{0o600, 0, 0, ""},
		{0o664, 0, 0, "is writable by group or others (mode 0664)"},
		{0o646, 0, 0, "is writable by group or others (mode 0646)"},
		{0o644, 65534, 0, "is owned by uid 65534, not root"},
		{0o666, 65534, 0, "is writable by group or others (mode 0666) and is owned by uid 65534, not root"},
		{0o666, 65534, 1000, ""}, // an unprivileged daemon trusts what it reads
	} {
		os.Chmod(p, tc.mode)
		os.Chown(p, tc.uid, tc.uid)
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(WriteFaults(fi, tc.euid), " and "); got != tc.want {
			t.Errorf("mode %04o uid %d euid %d: %q, want %q", tc.mode, tc.uid, tc.euid, got, tc.want)
		}
	}
}
