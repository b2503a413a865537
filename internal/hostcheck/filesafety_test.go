package hostcheck

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flexiq/flexiq-scaled/internal/config"
)

func TestCheckFileSafety(t *testing.T) {
	path := writeConfig(t, "")

	// Not root: nothing to protect, whatever the file looks like.
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := checkFileSafety(path, 1000); err != nil {
		t.Errorf("unprivileged: %v", err)
	}

	// As root, group or world write access is refused whoever owns the file.
	for _, mode := range []os.FileMode{0o666, 0o620, 0o602} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		err := checkFileSafety(path, 0)
		if err == nil || !strings.Contains(err.Error(), "writable by group or others") ||
			!strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "names commands") {
			t.Errorf("mode %04o: err = %v", mode, err)
		}
	}

	if err := checkFileSafety(filepath.Join(t.TempDir(), "missing.toml"), 0); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: err = %v", err)
	}

	if os.Geteuid() != 0 {
		t.Skip("ownership checks need root")
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := CheckFileSafety(path); err != nil {
		t.Errorf("root-owned 0644: %v", err)
	}
	if err := os.Chown(path, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := CheckFileSafety(path); err == nil || !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Errorf("foreign-owned: err = %v", err)
	}
}

// The safety checks reach every drop-in and the directory itself: whoever
// may write there may add a pool, with the command and user of their choice.
func TestDropInSafety(t *testing.T) {
	path := writeConfig(t, "")
	dir := config.DropInDir(path)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	good, bad := filepath.Join(dir, "a.toml"), filepath.Join(dir, "b.toml")
	for _, f := range []string{good, bad} {
		if err := os.WriteFile(f, nil, 0o640); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(bad, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	// As root (euid 0), the files here are not root's either when the
	// tests run unprivileged: check only the mode faults' files are named.
	err := checkConfigSafety(path, 0)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{dir + ": refusing config " + dir + ": it is writable by group or others (mode 0777)",
		bad + ": refusing config " + bad + ": it is writable by group or others (mode 0666)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error\n%v\nlacks %q", err, want)
		}
	}
	if err := checkConfigSafety(path, 1000); err != nil {
		t.Errorf("unprivileged: %v", err)
	}
}
