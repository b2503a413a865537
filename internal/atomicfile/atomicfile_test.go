package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteReplacesWholeAndLeavesNoTemp(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	for _, content := range []string{"first", "second, longer"} {
		if err := Write(path, []byte(content)); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(path); string(b) != content {
			t.Errorf("content %q, want %q", b, content)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only the file", len(entries))
	}
	if err := Write(filepath.Join(dir, "missing", "x"), nil); err == nil {
		t.Error("no error for a missing directory")
	}
}

// A symbolic link planted at the destination is replaced, never written
// through (rename(2) replaces the link itself), and the temporary file is
// created with O_EXCL under a random name (os.CreateTemp), so a link
// planted under a temporary name is not followed either: the write fails
// or picks another name. Issue 27, item 6: the discovery files are written
// this way into directories others may see.
func TestWriteModeDoesNotFollowLinks(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "out.conf")
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	if err := WriteMode(path, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Errorf("the link's target was written: %q", b)
	}
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o644 {
		t.Errorf("%s: %v, %v; want a regular file of mode 0644", path, fi, err)
	}
}
