package eventlog

// The kinds of issue 19's service pools, after issue 9's block.
const (
	// ReplicaReadiness: a service replica became ready (it enters
	// discovery) or stopped being ready (it leaves discovery).
	ReplicaReadiness Kind = "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b25"
	// ReplicaReplaced: a replica never became ready within
	// ready_timeout_sec, or stayed unready for unready_timeout_sec, and is
	// stopped and replaced.
	ReplicaReplaced Kind = "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b26"
	// DiscoveryCommand: a discovery after-change command ran (info, with
	// its output), or failed (warning; retried at the next change).
	DiscoveryCommand Kind = "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b27"
	// PortHeld: a listener that is not the replica's was found on one of
	// its ports (issue 27: a local user binding it first), or a port of a
	// fixed-port slot is held before its start (warning, once per
	// episode); an info entry when the port is free or the replica's
	// again.
	PortHeld Kind = "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b28"
	// WakeRequested: a connection at a service pool's wake address woke
	// the pool (issue 29); once per wake-up, from the daemon.
	WakeRequested Kind = "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b29"
	// WakeCycle: a wake-up ended, from the wake process: how many
	// connections it held and how long until the first ready replica.
	WakeCycle Kind = "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b2a"
)
