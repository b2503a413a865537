package poolstore

import (
	"os"
	"path/filepath"
	"testing"
)

type content struct {
	Version int    `json:"version"`
	Pool    string `json:"pool"`
	N       int    `json:"n,omitempty"`
}

func TestStoreRoundTrip(t *testing.T) {
	s := Store[content]{Dir: t.TempDir(), Prefix: "quiet-"}
	if got := s.Path("work"); got != filepath.Join(s.Dir, "quiet-work.json") {
		t.Errorf("path %q", got)
	}
	if _, ok, err := s.Load("work"); ok || err != nil {
		t.Errorf("no file: ok %v, err %v", ok, err)
	}
	if err := s.Save("work", content{Version: 1, Pool: "work", N: 3}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(s.Path("work"))
	if string(b) != `{"version":1,"pool":"work","n":3}` {
		t.Errorf("file %s", b)
	}
	if fi, err := os.Stat(s.Path("work")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, %v", fi.Mode(), err)
	}
	if v, ok, err := s.Load("work"); !ok || err != nil || v != (content{1, "work", 3}) {
		t.Errorf("load: %+v, %v, %v", v, ok, err)
	}
	if err := s.Remove("work"); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove("work"); err != nil {
		t.Errorf("removing a missing file: %v", err)
	}
	entries, _ := os.ReadDir(s.Dir)
	if len(entries) != 0 {
		t.Errorf("left %d entries", len(entries))
	}
}

func TestStoreCorruptAndUnreadable(t *testing.T) {
	s := Store[content]{Dir: t.TempDir(), Prefix: "pool-"}
	os.WriteFile(s.Path("work"), []byte("{not json"), 0o600)
	if _, ok, err := s.Load("work"); !ok || err == nil {
		t.Errorf("corrupt file: ok %v, err %v", ok, err)
	}
	os.Remove(s.Path("work"))
	os.Mkdir(s.Path("work"), 0o700) // a directory cannot be read as a file
	if _, ok, err := s.Load("work"); !ok || err == nil {
		t.Errorf("unreadable file: ok %v, err %v", ok, err)
	}
}

func TestStoreWithoutDirKeepsNothing(t *testing.T) {
	var s Store[content]
	if s.Path("work") != "" {
		t.Error("a path without a directory")
	}
	if err := s.Save("work", content{}); err != nil {
		t.Error(err)
	}
	if _, ok, err := s.Load("work"); ok || err != nil {
		t.Errorf("load: ok %v, err %v", ok, err)
	}
	if err := s.Remove("work"); err != nil {
		t.Error(err)
	}
}
