package control

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The cache looks a group up once while the file is unchanged, the missing
// group too, and again once the file is replaced or rewritten.
func TestGroupCache(t *testing.T) {
	path := filepath.Join(t.TempDir(), "group")
	write := func(content string) {
		t.Helper()
		tmp := path + ".new"
		if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil { // as groupadd does
			t.Fatal(err)
		}
	}
	ids := map[string]uint32{AdminGroup: 990}
	var lookups int
	c := &groupCache{path: path, lookup: func(name string) (uint32, error) {
		lookups++
		if id, ok := ids[name]; ok {
			return id, nil
		}
		return 0, errors.New("unknown group " + name)
	}}
	check := func(name string, wantID uint32, wantErr bool, wantLookups int) {
		t.Helper()
		id, err := c.ID(name)
		if id != wantID || (err != nil) != wantErr || lookups != wantLookups {
			t.Errorf("ID(%s) = %d, %v after %d lookups; want %d, error %v after %d", name, id, err, lookups, wantID, wantErr, wantLookups)
		}
	}
	write("flexiq-scaled-admin:x:990:\n")
	check(AdminGroup, 990, false, 1)
	check(AdminGroup, 990, false, 1)
	check(ReadGroup, 0, true, 2)
	check(ReadGroup, 0, true, 2)

	// groupadd flexiq-scaled: a new file.
	ids[ReadGroup] = 991
	write("flexiq-scaled-admin:x:990:\nflexiq-scaled:x:991:\n")
	check(ReadGroup, 991, false, 3)
	check(AdminGroup, 990, false, 4)
	check(ReadGroup, 991, false, 4)

	// Rewritten in place, same size, later: a new mtime.
	ids[ReadGroup] = 992
	time.Sleep(10 * time.Millisecond)
	if err := os.WriteFile(path, []byte("flexiq-scaled-admin:x:990:\nflexiq-scaled:x:992:\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	check(ReadGroup, 992, false, 5)

	// No file to stat: no caching, every call looks up.
	os.Remove(path)
	check(AdminGroup, 990, false, 6)
	check(AdminGroup, 990, false, 7)
}

func BenchmarkAdmitRefused(b *testing.B) {
	p := Peer{UID: 65534, GID: 65534}
	for _, bc := range []struct {
		name string
		a    Authorizer
	}{
		{"os-user", Authorizer{GroupID: lookupGroupID}},
		{"cached", Authorizer{}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if bc.a.Admit(p) == nil {
					b.Fatal("nobody admitted")
				}
			}
		})
	}
}
