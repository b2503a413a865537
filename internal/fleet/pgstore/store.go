package pgstore

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flexiq/flexiq-scaled/internal/fleet"
)

// Acquire implements fleet.Store: one statement (see acquireSQL).
// epoch is the epoch holder holds (0 when it holds none, e.g. after a
// restart: then even its own unexpired lease is not renewed, and it waits
// for the lease to expire, since another instance with the same id may
// hold it). Lease.Holder is "" for a released lease.
func (s *Store) Acquire(ctx context.Context, pool, holder string, epoch uint64, ttl time.Duration) (fleet.Lease, bool, error) {
	if holder == "" {
		return fleet.Lease{}, false, errors.New("fleet store: Acquire with an empty holder")
	}
	ms := ttl.Milliseconds()
	if ms < 1 {
		return fleet.Lease{}, false, fmt.Errorf("fleet store: Acquire with a TTL of %s", ttl)
	}
	if !fleet.ValidEpoch(epoch) {
		epoch = 0 // garbage the caller saw: it knows no epoch
	}
	e, err := epochArg(epoch)
	if err != nil {
		return fleet.Lease{}, false, err
	}
	var l fleet.Lease
	var held bool
	err = s.do(ctx, "acquiring the lease of", pool, func(ctx context.Context, p *pgxpool.Pool) error {
		var ep int64
		err := p.QueryRow(ctx, s.sql.acquire, pool, holder, e, ms).Scan(&l.Holder, &ep, &l.Expires, &held)
		if errors.Is(err, pgx.ErrNoRows) {
			// Another host inserted the pool's first row concurrently:
			// not ours; it is there at the next call.
			return nil
		}
		l.Epoch = uint64(ep)
		return err
	})
	if err != nil {
		return fleet.Lease{}, false, err
	}
	return l, held, nil
}

// Release implements fleet.Store: one statement, which also notifies the
// pool's Channel when it released the lease. Not holding it is no error.
func (s *Store) Release(ctx context.Context, pool, holder string, epoch uint64) error {
	e, err := epochArg(epoch)
	if err != nil {
		return err
	}
	return s.do(ctx, "releasing the lease of", pool, func(ctx context.Context, p *pgxpool.Pool) error {
		_, err := p.Exec(ctx, s.sql.release, pool, holder, e, Channel(pool))
		return err
	})
}

// Heartbeat implements fleet.Store: one statement, which also forgets the
// pool's members silent for longer than Options.ForgetAfter.
func (s *Store) Heartbeat(ctx context.Context, pool string, m fleet.Member) error {
	if m.ID == "" {
		return errors.New("fleet store: Heartbeat with an empty host id")
	}
	return s.do(ctx, "heartbeat for", pool, func(ctx context.Context, p *pgxpool.Pool) error {
		_, err := p.Exec(ctx, s.sql.heartbeat, pool, m.ID, clampInt32(m.Capacity), clampInt32(m.Live),
			clampInt32(m.Starting), clampInt32(m.Draining), m.Version, s.opts.ForgetAfter.Milliseconds())
		return err
	})
}

// Members implements fleet.Store: one statement, sorted by host id.
func (s *Store) Members(ctx context.Context, pool string) ([]fleet.Member, time.Time, error) {
	var ms []fleet.Member
	var now time.Time
	err := s.do(ctx, "listing the members of", pool, func(ctx context.Context, p *pgxpool.Pool) error {
		ms = ms[:0]
		rows, err := p.Query(ctx, s.sql.members, pool)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id, version *string
			var capacity, live, starting, draining *int32
			var seen *time.Time
			if err := rows.Scan(&now, &id, &capacity, &live, &starting, &draining, &version, &seen); err != nil {
				return err
			}
			if id == nil { // no member: the LEFT JOIN's one row
				continue
			}
			ms = append(ms, fleet.Member{ID: *id, Capacity: int(*capacity), Live: int(*live),
				Starting: int(*starting), Draining: int(*draining), Version: *version, SeenAt: *seen})
		}
		return rows.Err()
	})
	if err != nil {
		return nil, time.Time{}, err
	}
	return ms, now, nil
}

// WritePlan implements fleet.Store: one statement that checks the lease
// and writes, or returns fleet.ErrFenced. p.Epoch is ignored: the plan is
// stored with epoch, the one that was checked.
func (s *Store) WritePlan(ctx context.Context, pool, holder string, epoch uint64, p fleet.Plan) error {
	e, err := epochArg(epoch)
	if err != nil {
		return err
	}
	shares, err := encodeShares(p.Shares)
	if err != nil {
		return err
	}
	return s.do(ctx, "writing the plan of", pool, func(ctx context.Context, db *pgxpool.Pool) error {
		var at time.Time
		err := db.QueryRow(ctx, s.sql.writePlan, pool, holder, e, clampInt32(p.Target), shares, hex.EncodeToString(p.State)).Scan(&at)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w (pool %q, holder %s, epoch %d)", fleet.ErrFenced, pool, holder, epoch)
		}
		return err
	})
}

// ReadPlan implements fleet.Store: one statement.
func (s *Store) ReadPlan(ctx context.Context, pool string) (fleet.Plan, time.Time, error) {
	var plan fleet.Plan
	var now time.Time
	var bad error // the plan is there, but unusable
	err := s.do(ctx, "reading the plan of", pool, func(ctx context.Context, p *pgxpool.Pool) error {
		var epoch, bound *int64
		var target *int32
		var shares, state *string
		var at *time.Time
		if err := p.QueryRow(ctx, s.sql.readPlan, pool).Scan(&now, &epoch, &target, &shares, &state, &at, &bound); err != nil {
			return err
		}
		plan = fleet.Plan{}
		if epoch == nil {
			return nil
		}
		var err error
		if plan, err = decodePlan(*epoch, *target, *shares, state, *at); err != nil {
			bad = err
		} else if bound != nil && fleet.ValidEpoch(uint64(*bound)) && plan.Epoch > uint64(*bound) {
			bad = fmt.Errorf("its epoch %d is above the lease's %d: no leader wrote it", plan.Epoch, *bound)
		}
		return nil
	})
	if err != nil {
		return fleet.Plan{}, time.Time{}, err
	}
	if bad != nil {
		return fleet.Plan{}, now, fmt.Errorf("%w (pool %q): %w", fleet.ErrBadPlan, pool, bad)
	}
	return plan, now, nil
}

func decodePlan(epoch int64, target int32, shares string, state *string, at time.Time) (fleet.Plan, error) {
	if epoch < 0 || !fleet.ValidEpoch(uint64(epoch)) {
		return fleet.Plan{}, fmt.Errorf("the stored plan's epoch %d is not an epoch (1 to 2^53)", epoch)
	}
	p := fleet.Plan{Epoch: uint64(epoch), Target: int(target), At: at}
	if err := json.Unmarshal([]byte(shares), &p.Shares); err != nil {
		return fleet.Plan{}, fmt.Errorf("the stored plan's shares: %w", err)
	}
	if state != nil && *state != "" {
		b, err := hex.DecodeString(*state)
		if err != nil {
			return fleet.Plan{}, fmt.Errorf("the stored plan's state: %w", err)
		}
		p.State = b
	}
	return p, nil
}

// encodeShares is the shares as a JSON object ({} for none), the shape an
// operator reads in psql.
func encodeShares(shares map[string]int) (string, error) {
	if shares == nil {
		return "{}", nil
	}
	b, err := json.Marshal(shares)
	if err != nil {
		return "", fmt.Errorf("fleet store: encoding the plan's shares: %w", err)
	}
	return string(b), nil
}

// epochArg is epoch as the bigint column holds it.
func epochArg(epoch uint64) (int64, error) {
	if epoch > math.MaxInt64 {
		return 0, fmt.Errorf("fleet store: epoch %d is beyond a bigint", epoch)
	}
	return int64(epoch), nil
}

// clampInt32 fits a count into the integer columns (counts are far
// smaller; a wrapped value would be worse than a clamped one).
func clampInt32(n int) int32 {
	return int32(max(min(n, math.MaxInt32), math.MinInt32))
}
