// Package poolstore keeps one JSON file per pool of one kind: the
// operator's overrides in the state directory, the windows' state and the
// quiet workers in the runtime directory. Each file is DIR/PREFIX-POOL.json,
// written atomically (internal/atomicfile, mode 0600), so that a crash
// mid-write leaves the previous file and a restarted daemon never reads half
// of one. What a file means, and whether it is still good (its version, its
// pool, its age), is for its owner to check: the stores differ there.
package poolstore

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/flexiq/flexiq-scaled/internal/atomicfile"
)

// Store is the files of one kind, T being their JSON content. With Dir
// empty, nothing is kept: loads find no file, saves and removes do nothing.
type Store[T any] struct {
	Dir    string
	Prefix string // "override-", "pool-", "quiet-"
}

// Path is the pool's file, or "" when nothing is kept.
func (s Store[T]) Path(pool string) string {
	if s.Dir == "" {
		return ""
	}
	return filepath.Join(s.Dir, s.Prefix+pool+".json")
}

// Read returns the pool's file as it is. ok is false when there is none,
// which is no error.
func (s Store[T]) Read(pool string) (b []byte, ok bool, err error) {
	path := s.Path(pool)
	if path == "" {
		return nil, false, nil
	}
	b, err = os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	return b, true, err
}

// Load reads and decodes the pool's file. ok is false when there is none;
// err is the read's or the decoding's error.
func (s Store[T]) Load(pool string) (v T, ok bool, err error) {
	b, ok, err := s.Read(pool)
	if ok && err == nil {
		err = json.Unmarshal(b, &v)
	}
	return v, ok, err
}

// Save replaces the pool's file with v, atomically.
func (s Store[T]) Save(pool string, v T) error {
	path := s.Path(pool)
	if path == "" {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return atomicfile.Write(path, b)
}

// Remove deletes the pool's file; one already gone is no error.
func (s Store[T]) Remove(pool string) error {
	path := s.Path(pool)
	if path == "" {
		return nil
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
