// Package testfile makes the files that tests of file safety need: a file
// of a given mode and owner, as an administrator (or an attacker) would
// leave it. It needs root to give a file away.
package testfile

import (
	"os"
	"testing"
)

// Owned writes text to path with exactly mode (whatever the umask), owned
// by uid (and the group of the same number), and returns path.
func Owned(t testing.TB, path, text string, mode os.FileMode, uid int) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, uid, uid); err != nil {
		t.Fatal(err)
	}
	return path
}
