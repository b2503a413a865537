// Package stores opens a fleet's coordination store by its URL's scheme
// (issue 20): redisstore for redis:// and rediss://, pgstore for
// postgres:// and postgresql://. It lives apart from package fleet, which
// the stores import for its types; which scheme is which store is
// config.FleetStoreOf's, the checks at load using the same.
package stores

import (
	"context"
	"errors"
	"fmt"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/conn"
	"github.com/flexiq/flexiq-scaled/internal/fleet"
	"github.com/flexiq/flexiq-scaled/internal/fleet/pgstore"
	"github.com/flexiq/flexiq-scaled/internal/fleet/redisstore"
)

// Open opens the store f names; it connects at its first call. A URL that
// url_file or url_credential holds is read now, for its scheme (config
// knew only where it comes from).
func Open(f config.Fleet) (fleet.Store, error) {
	kind := f.Store
	if kind == "" {
		u, err := conn.URL(f.Conn)
		if err != nil {
			return nil, fmt.Errorf("the fleet's store: %w", err)
		}
		if kind, err = config.FleetStoreOf(u.Scheme); err != nil {
			return nil, fmt.Errorf("the fleet's store: the URL from %s is neither redis:// nor postgres://", f.Conn.URLOrigin())
		}
	}
	switch kind {
	case config.FleetStoreRedis:
		return redisstore.New(f.Conn, redisstore.Options{}), nil
	case config.FleetStorePostgres:
		return pgstore.New(f.Conn, pgstore.Options{}), nil
	}
	return nil, fmt.Errorf("the fleet's store: unknown kind %q", kind)
}

// Kind names s for status: config.FleetStorePostgres or
// config.FleetStoreRedis (also for a test's fake).
func Kind(s fleet.Store) string {
	if _, ok := s.(*pgstore.Store); ok {
		return config.FleetStorePostgres
	}
	return config.FleetStoreRedis
}

// ErrNoReleases is Releases on a store that cannot tell them (a test's
// fake): the caller relies on the lease's TTL alone.
var ErrNoReleases = errors.New("the store does not tell releases")

// Releases calls wake at each release of pool's lease (another host's
// clean stop), so that this host may lead within a second rather than a
// TTL, until ctx ends or the subscription fails: its error, which the
// caller retries after a pause.
func Releases(ctx context.Context, s fleet.Store, pool string, wake func()) error {
	switch s := s.(type) {
	case *redisstore.Store:
		epochs, stop, err := s.Released(ctx, pool)
		if err != nil {
			return err
		}
		defer stop()
		for range epochs {
			wake()
		}
		return errors.New("the release subscription ended")
	case *pgstore.Store:
		ln, err := s.Listen(ctx, pool)
		if err != nil {
			return err
		}
		defer ln.Close(context.WithoutCancel(ctx))
		for {
			if _, err := ln.Wait(ctx); err != nil {
				return err
			}
			wake()
		}
	}
	return ErrNoReleases
}
