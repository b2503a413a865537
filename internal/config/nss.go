package config

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

// lookupFunc reports whether name (or a numeric ID) exists in the NSS
// database db ("passwd" or "group"). A non-nil error means it could not be
// found out, which must never refuse a configuration: systemd may well know
// the name.
type lookupFunc func(db, name string) (found bool, err error)

// getentTimeout bounds one lookup: an LDAP or SSSD source can hang, and a
// reload must not hang with it.
const getentTimeout = 10 * time.Second

// nssLookup resolves names the way systemd will: through NSS, with every
// source nsswitch.conf lists (files, systemd-userdb, LDAP, SSSD...). The
// binary is static, so its os/user reads only /etc/passwd and /etc/group;
// getent, linked against the system's libc, sees all of them.
func nssLookup(db, name string) (bool, error) {
	path, err := exec.LookPath("getent")
	if err != nil {
		return osUserLookup(db, name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), getentTimeout)
	defer cancel()
	// "--": a name starting with "-" is a name, not an option.
	out, err := exec.CommandContext(ctx, path, db, "--", name).CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &exit) && exit.ExitCode() == 2:
		// getent(1): "One or more supplied key could not be found in
		// the database."
		return false, nil
	case ctx.Err() != nil:
		return false, fmt.Errorf("getent %s %s: no answer within %s", db, name, getentTimeout)
	default:
		return false, fmt.Errorf("getent %s %s: %v %s", db, name, err, strings.TrimSpace(string(out)))
	}
}

// osUserLookup is the fallback when getent is missing: it sees only the
// files, so a name it does not find may still exist elsewhere.
func osUserLookup(db, name string) (bool, error) {
	_, numErr := strconv.ParseUint(name, 10, 32)
	numeric := numErr == nil
	var err error
	switch {
	case db == dbPasswd && numeric:
		_, err = user.LookupId(name)
	case db == dbPasswd:
		_, err = user.Lookup(name)
	case numeric:
		_, err = user.LookupGroupId(name)
	default:
		_, err = user.LookupGroup(name)
	}
	var (
		uu  user.UnknownUserError
		uid user.UnknownUserIdError
		ug  user.UnknownGroupError
		gid user.UnknownGroupIdError
	)
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &uu), errors.As(err, &uid), errors.As(err, &ug), errors.As(err, &gid):
		return false, nil
	default:
		return false, err
	}
}
