package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"

	"github.com/flexiq/flexiq-scaled/internal/safefile"
)

// maxSecretFile bounds what a credential file may hold: a URL or a password
// is far smaller, and a file that is not one must not cost memory.
const maxSecretFile = 64 << 10

// deployFirst ends the message about a credential file that is not there: the
// files are checked when the configuration is loaded or reloaded, so that a
// bad one is refused while the running configuration still stands, rather
// than leaving the pool at zero workers when it first connects.
const deployFirst = "deploy the file before the configuration that names it (it is checked at load and at reload)"

// OpenSecretFile opens a credential file (password_file, url_file) as the
// daemon trusts it: the file itself, not a symbolic link (O_NOFOLLOW: a link
// could hand the daemon, which runs as root, a file its writer cannot
// read, and have it sent to a server they choose); a regular file; owned by
// root (or by the daemon's own user when it does not run as root); with no
// permission bits at all for group or others, since a secret anyone else can
// read or write is no secret. The load-time check and the connect-time read
// both go through it, so that they cannot disagree.
func OpenSecretFile(path string) (*os.File, error) {
	return openSecretFile(path, os.Geteuid())
}

func openSecretFile(path string, euid int) (*os.File, error) {
	// safefile.Open: a FIFO put in the file's place must not hang the
	// daemon's load, and a link is not followed.
	f, fi, err := safefile.Open(path)
	if err != nil {
		var nr *safefile.NotRegularError
		switch {
		case errors.As(err, &nr) && nr.Type&fs.ModeSymlink != 0:
			return nil, fmt.Errorf("credential file %s is a symbolic link: name the file itself (links are not followed)", path)
		case errors.As(err, &nr):
			return nil, fmt.Errorf("credential file %s is not a regular file (%s)", path, nr.Type)
		case errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("credential file %s does not exist: %s", path, deployFirst)
		}
		return nil, fmt.Errorf("credential file %s: %w", path, err)
	}
	if err := judgeSecretFile(path, fi, euid); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// judgeSecretFile says what is wrong with an open credential file, all of it
// at once.
func judgeSecretFile(path string, fi fs.FileInfo, euid int) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("credential file %s is not a regular file (%s)", path, fi.Mode().Type())
	}
	var faults, fixes []string
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 && int(st.Uid) != euid {
		faults = append(faults, fmt.Sprintf("is owned by uid %d, not root", st.Uid))
		fixes = append(fixes, "chown root: "+path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		faults = append(faults, fmt.Sprintf("gives group or others access (mode %04o)", perm))
		fixes = append(fixes, "chmod 0600 "+path)
	}
	if len(faults) == 0 {
		return nil
	}
	return fmt.Errorf("credential file %s %s: %s", path, strings.Join(faults, " and "), strings.Join(fixes, "; "))
}

// ReadSecretFile reads a credential file opened by OpenSecretFile, without
// its trailing newline. Errors name the file, never its content.
func ReadSecretFile(path string) (string, error) {
	f, err := OpenSecretFile(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil {
		return "", fmt.Errorf("reading credential file %s: %w", path, err)
	}
	if len(b) > maxSecretFile {
		return "", fmt.Errorf("credential file %s is over %d KiB: it should hold one URL or one password", path, maxSecretFile>>10)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// ReadCredential reads a systemd credential passed to the daemon's unit
// ($CREDENTIALS_DIRECTORY/NAME, set up by LoadCredential=), without its
// trailing newline. systemd makes the directory and its files readable by
// the unit only.
func ReadCredential(name string) (string, error) {
	dir := os.Getenv("CREDENTIALS_DIRECTORY")
	if dir == "" {
		return "", fmt.Errorf("credential %s: $CREDENTIALS_DIRECTORY is not set: add LoadCredential=%s:/path/to/secret to the daemon's unit (systemctl edit flexiq-scaled)", name, name)
	}
	f, err := os.Open(dir + "/" + name)
	if err != nil {
		return "", fmt.Errorf("credential %s: %w", name, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil {
		return "", fmt.Errorf("credential %s: %w", name, err)
	}
	if len(b) > maxSecretFile {
		return "", fmt.Errorf("credential %s is over %d KiB: it should hold one URL or one password", name, maxSecretFile>>10)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}
