// Package atomicfile writes a file so that a reader sees either the whole
// new content or the old file, never a part: through a temporary file in the
// same directory and a rename. The daemon's state and verdict files in
// /run/flexiq-scaled are written this way; a crash mid-write leaves the
// previous file.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// TempPrefix starts the names of the temporary files, so that a reader of
// the directory can skip them.
const TempPrefix = ".tmp-"

// Write replaces path with data, readable and writable by its owner only.
func Write(path string, data []byte) error {
	return WriteMode(path, data, 0o600)
}

// WriteMode is Write with the file's permission bits: the temporary file is
// given them before the rename, so that the file never appears with others.
func WriteMode(path string, data []byte, perm os.FileMode) error {
	dir, name := filepath.Split(path)
	f, err := os.CreateTemp(dir, TempPrefix+name+".")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	tmp := f.Name()
	err = f.Chmod(perm)
	if err == nil {
		_, err = f.Write(data)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
