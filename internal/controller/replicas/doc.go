// Package replicas holds what a service pool's replicas need and a queue
// pool's workers do not (issue 19, issue 28 item 2): their ports, their
// readiness, the check that their listeners are their own, and what is
// published of them to discovery. It knows nothing of the pool's loop or
// its slots: the controller calls it, and a queue pool never does.
package replicas
