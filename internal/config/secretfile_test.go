package config

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// The connect-time read goes through the same gate as the load-time check.
func TestReadSecretFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "pw")
	if err := os.WriteFile(p, []byte("hunter2\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadSecretFile(p); err != nil || got != "hunter2" {
		t.Fatalf("ReadSecretFile = %q, %v", got, err)
	}
	os.Chmod(p, 0o604)
	if _, err := ReadSecretFile(p); err == nil || !strings.Contains(err.Error(), "mode 0604") {
		t.Errorf("err = %v, want a refusal of mode 0604", err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, maxSecretFile+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSecretFile(big); err == nil || !strings.Contains(err.Error(), "over 64 KiB") {
		t.Errorf("err = %v, want a refusal of a file over 64 KiB", err)
	}
}

// A daemon that does not run as root (run --user) takes its own files as
// well as root's.
func TestSecretFileOwnerNotRoot(t *testing.T) {
	p := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	uid := int(fi.Sys().(*syscall.Stat_t).Uid)
	if err := judgeSecretFile(p, fi, uid); err != nil {
		t.Errorf("the daemon's own file: %v", err)
	}
	if uid != 0 {
		if err := judgeSecretFile(p, fi, uid+1); err == nil {
			t.Errorf("another user's file accepted")
		}
	}
}
