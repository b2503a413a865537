// Package probe checks whether the replicas of a service pool are ready to
// serve: issue 19, item 2 ("Readiness").
//
// It is pure: no D-Bus, no controller, no configuration parsing. It holds
//
//   - Spec, a probe as the configuration will declare it (HTTP GET on a
//     named port, TCP connect, or a command), with Kubernetes' timing
//     fields, and Spec.Validate, whose errors name the key at fault;
//   - the checks themselves (HTTPCheck, TCPCheck, CommandCheck), each a
//     Check: one attempt bounded by its context. HTTP bodies are read at
//     most 64 KiB and headers at most 64 KiB, proxies from the environment
//     are ignored and redirects to another host are not followed: the
//     daemon is root, and a replica is not trusted with more than saying
//     whether it is ready (docs/security.md);
//   - Tracker, the per-replica state machine with Kubernetes' threshold
//     semantics (unknown → ready after success_threshold consecutive passes,
//     ready → not ready after failure_threshold consecutive failures, and
//     back), which also says since when a replica has not been ready;
//   - Prober, which runs many targets on one scheduler goroutine with
//     jitter (waking at most every Quantum, which is what keeps 200
//     probes a second cheap: BenchmarkProbe200), runs each attempt in its
//     own short-lived goroutine, and delivers state changes as Transitions
//     on one channel.
//
// Still to wire (the next session): the [pools.readiness] table in
// internal/config (it calls Spec.Validate with the pool's declared port
// names), the command executor that runs a probe command as a transient
// unit through internal/units, the pool's loop consuming
// Prober.Transitions (adding a target when a replica starts or is adopted,
// with Initial=Ready when a restart finds it in discovery, removing it when
// the replica drains), the stop-and-replace of a replica that stays
// unready (Transition.NotReadySince), and the ready/not-ready split in
// status and the metrics. The systemd-native readiness (Type=notify,
// READY=1) needs no probe and is not here.
package probe
