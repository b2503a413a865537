package config

import "fmt"

// reader collects the problems of the file being read, each under the
// file's name and the key's, and types the file's leaves (getters.go): the
// part of loading that every table shares. The loaders of the sections
// (loader for the daemon and its pools, fleetLoader for the fleet tables)
// share one, so that one run lists the problems of every table, in order.
type reader struct {
	// file is the file whose problems are being reported: the main one,
	// or the drop-in that defines the pool being read.
	file     string
	problems []Problem
}

func (r *reader) add(key, format string, args ...any) {
	r.problems = append(r.problems, Problem{File: r.file, Key: key, Msg: fmt.Sprintf(format, args...)})
}

func (r *reader) err() error {
	if len(r.problems) == 0 {
		return nil
	}
	return &Error{Problems: r.problems}
}
