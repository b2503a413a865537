package workers

import (
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/source"
)

// testPool is a queue pool as the controller's tests configure it
// (controller's fake_test.go), for the specs built here.
func testPool(name string) *config.Pool {
	return &config.Pool{
		Name: name, Exec: []string{"/bin/worker"}, User: "flexiq",
		MinWorkers: 1, MaxWorkers: 10, TargetQueueDepthPerWorker: 10, TargetUtilisation: 1,
		ThreadsPerWorker: 1, CPUPerWorker: 1, Tolerance: 0.1, ScaleDownWindow: 300 * time.Second,
		PollInterval: time.Second, DrainTimeout: 30 * time.Second, DrainSignal: "SIGTERM", DrainSignalNumber: 15,
		Source: config.Source{Type: "flexiq-sqlite", Settings: source.FlexiqSQLiteSettings{Path: "/var/lib/q.db"}}, MaxSurge: 1,
	}
}
