package eventlog

// Fleet mode (issue 20, …6b60 upward): the coordination of a pool across
// hosts. Each comes once per episode; FLEXIQ_EPOCH carries the lease's or
// the plan's epoch, FLEXIQ_FLEET_HOST this host's id.
const (
	// FleetLeaderGained: this host took the pool's lease and decides for
	// the fleet.
	FleetLeaderGained Kind = "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b60"
	// FleetLeaderLost: this host leads no more (FLEXIQ_REASON: fenced,
	// expired, resigned).
	FleetLeaderLost Kind = "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b61"
	// FleetPlanStale: the plan is older than the TTL: the host holds its
	// last target.
	FleetPlanStale Kind = "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b62"
	// FleetPlanFallback: stale past the hold: the host falls back to its
	// share of min_workers (never below what it runs).
	FleetPlanFallback Kind = "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b63"
	// FleetPlanFresh: a fresh plan again after a stale episode.
	FleetPlanFresh Kind = "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b64"
	// FleetStoreUnreachable and FleetStoreRecovered: the coordination
	// store stopped and started answering.
	FleetStoreUnreachable Kind = "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b65"
	FleetStoreRecovered   Kind = "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b66"
	// FleetMemberUnreadable: the store's entry for a member cannot be
	// read (another version's encoding, a corrupt or hostile write): the
	// member is skipped. Once while it stays so (FLEXIQ_FLEET_MEMBER
	// names it).
	FleetMemberUnreadable Kind = "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b67"
)
