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
// Who uses it: internal/config checks a pool's [pools.NAME.service.readiness]
// table with Spec.Validate; the pool's loop (internal/controller, service.go)
// owns one Prober per service pool, reads its Transitions, runs command
// probes as transient units, and replaces a replica that stays unready.
// The systemd-native readiness (Type=notify, READY=1) needs no probe and is
// not here. docs/services.md is the user's view.
package probe
