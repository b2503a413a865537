package hostcheck

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"time"
)

// Databases a lookupFunc is asked about.
const (
	dbPasswd = "passwd"
	dbGroup  = "group"
)

// account is what NSS says of a user or group name (or numeric ID).
type account struct {
	found bool
	// id is the uid (passwd) or gid (group) the name resolves to; gid is
	// a user's primary group (passwd only). Both are meaningful only when
	// found is true and known is true.
	id, gid uint32
	// known is false when the entry was found but its IDs could not be
	// read (an entry getent printed in a shape it should not have).
	known bool
}

// lookupFunc reports whether name (or a numeric ID) exists in the NSS
// database db ("passwd" or "group"), and what it resolves to. A non-nil
// error means it could not be found out, which must never refuse a
// configuration: systemd may well know the name.
type lookupFunc func(db, name string) (account, error)

// getentTimeout bounds one lookup: an LDAP or SSSD source can hang, and a
// reload must not hang with it.
const getentTimeout = 10 * time.Second

// nssLookup resolves names the way systemd will: through NSS, with every
// source nsswitch.conf lists (files, systemd-userdb, LDAP, SSSD...). The
// binary is static, so its os/user reads only /etc/passwd and /etc/group;
// getent, linked against the system's libc, sees all of them.
func nssLookup(db, name string) (account, error) {
	path, err := exec.LookPath("getent")
	if err != nil {
		return osUserLookup(db, name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), getentTimeout)
	defer cancel()
	// "--": a name starting with "-" is a name, not an option.
	out, err := exec.CommandContext(ctx, path, db, "--", name).Output()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return parseGetent(db, out), nil
	case errors.As(err, &exit) && exit.ExitCode() == 2:
		// getent(1): "One or more supplied key could not be found in
		// the database."
		return account{}, nil
	case ctx.Err() != nil:
		return account{}, fmt.Errorf("getent %s %s: no answer within %s", db, name, getentTimeout)
	default:
		msg := ""
		if errors.As(err, &exit) {
			msg = strings.TrimSpace(string(exit.Stderr))
		}
		return account{}, fmt.Errorf("getent %s %s: %v %s", db, name, err, msg)
	}
}

// parseGetent reads the IDs off getent's first line:
// name:password:uid:gid:... for passwd, name:password:gid:members for
// group.
func parseGetent(db string, out []byte) account {
	line, _, _ := strings.Cut(string(out), "\n")
	f := strings.Split(line, ":")
	a := account{found: true}
	if len(f) < 3 {
		return a
	}
	id, err := strconv.ParseUint(f[2], 10, 32)
	if err != nil {
		return a
	}
	a.id = uint32(id)
	if db == dbPasswd {
		if len(f) < 4 {
			return a
		}
		gid, err := strconv.ParseUint(f[3], 10, 32)
		if err != nil {
			return a
		}
		a.gid = uint32(gid)
	}
	a.known = true
	return a
}

// osUserLookup is the fallback when getent is missing: it sees only the
// files, so a name it does not find may still exist elsewhere.
func osUserLookup(db, name string) (account, error) {
	_, numErr := strconv.ParseUint(name, 10, 32)
	numeric := numErr == nil
	var (
		err     error
		id, gid string
	)
	switch {
	case db == dbPasswd:
		var u *user.User
		if numeric {
			u, err = user.LookupId(name)
		} else {
			u, err = user.Lookup(name)
		}
		if err == nil {
			id, gid = u.Uid, u.Gid
		}
	default:
		var g *user.Group
		if numeric {
			g, err = user.LookupGroupId(name)
		} else {
			g, err = user.LookupGroup(name)
		}
		if err == nil {
			id, gid = g.Gid, "0"
		}
	}
	var (
		uu  user.UnknownUserError
		uid user.UnknownUserIdError
		ug  user.UnknownGroupError
		ugi user.UnknownGroupIdError
	)
	switch {
	case err == nil:
		a := account{found: true}
		i, err1 := strconv.ParseUint(id, 10, 32)
		g, err2 := strconv.ParseUint(gid, 10, 32)
		if err1 == nil && err2 == nil {
			a.id, a.gid, a.known = uint32(i), uint32(g), true
		}
		return a, nil
	case errors.As(err, &uu), errors.As(err, &uid), errors.As(err, &ug), errors.As(err, &ugi):
		return account{}, nil
	default:
		return account{}, err
	}
}

// numericID is a user or group name that is a decimal number, as systemd
// reads User= and Group=: an ID, whatever NSS says.
func numericID(name string) (uint32, bool) {
	id, err := strconv.ParseUint(name, 10, 32)
	return uint32(id), err == nil
}
