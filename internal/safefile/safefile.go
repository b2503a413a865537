// Package safefile opens the files the daemon reads from paths that others
// may have touched (configuration drop-ins, credential files, discovery
// templates, the discovery files it rewrites), so that what is read is what
// the path names: the file itself and not a symbolic link's target, a
// regular file and not a FIFO that blocks the reader or a device, and read
// only up to a bound. It also holds the rule by which the daemon trusts a
// file that tells it what to run: only root can write it (WriteFaults).
//
// It is one mechanism for internal/config and internal/discovery, so that
// a template is judged exactly as config.toml is.
package safefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// NotRegularError is a path that names something other than a regular
// file: Type is its fs.FileMode type bits (fs.ModeSymlink for a link,
// which Open never follows).
type NotRegularError struct {
	Path string
	Type fs.FileMode
}

// What names the kind of file, for messages.
func (e *NotRegularError) What() string {
	switch t := e.Type; {
	case t&fs.ModeSymlink != 0:
		return "a symbolic link"
	case t&fs.ModeDir != 0:
		return "a directory"
	case t&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case t&fs.ModeSocket != 0:
		return "a socket"
	case t&fs.ModeDevice != 0:
		return "a device"
	}
	return "not a regular file (" + e.Type.String() + ")"
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s is %s, not a regular file", e.Path, e.What())
}

// Open opens path for reading if it is a regular file, and returns it with
// its fs.FileInfo, taken from the open file so that a check of it holds
// for what is read. O_NOFOLLOW: a symbolic link is refused, never followed
// (a link could hand the daemon, which runs as root, a file its planter
// cannot read). O_NONBLOCK: opening a FIFO returns at once and is then
// refused, rather than blocking until someone writes to it; on a regular
// file the flag changes nothing. Anything other than a regular file is a
// *NotRegularError; a missing path is an error satisfying fs.ErrNotExist.
func Open(path string) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, nil, &NotRegularError{Path: path, Type: fs.ModeSymlink}
		}
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, &NotRegularError{Path: path, Type: fi.Mode().Type()}
	}
	return f, fi, nil
}

// TooLargeError is a file holding more than the reader's limit.
type TooLargeError struct {
	Path  string
	Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s holds more than %s", e.Path, Size(e.Limit))
}

// Size spells a byte count as the limits here are chosen: 4 MiB, 64 KiB.
func Size(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// Read opens path with Open and reads it whole; more than limit bytes is a
// *TooLargeError, found without reading past limit+1.
func Read(path string, limit int64) ([]byte, fs.FileInfo, error) {
	f, fi, err := Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	b, err := ReadAll(f, path, limit)
	return b, fi, err
}

// ReadAll reads f, opened from path, to its end or to a *TooLargeError
// past limit bytes.
func ReadAll(f io.Reader, path string, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, &TooLargeError{Path: path, Limit: limit}
	}
	return b, nil
}

// WriteFaults says why anyone but root could change the file fi describes
// (its owner is not root; group or others may write it), for a file whose
// content the daemon acts on as root: the commands a configuration names,
// the files a template writes. Writing such a file is as good as having
// root. Empty when nothing is wrong, and always when euid is not 0: a
// daemon that is not root can only act as itself, so the file grants its
// writer nothing they do not have.
func WriteFaults(fi fs.FileInfo, euid int) []string {
	if euid != 0 {
		return nil
	}
	var faults []string
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		faults = append(faults, fmt.Sprintf("is writable by group or others (mode %04o)", perm))
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 {
		faults = append(faults, fmt.Sprintf("is owned by uid %d, not root", st.Uid))
	}
	return faults
}
