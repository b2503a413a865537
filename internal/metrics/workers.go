package metrics

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flexiq/flexiq-scaled/internal/units"
)

// WorkerReader lists the workers and reads their cgroups: *units.Manager.
type WorkerReader interface {
	ListWorkers(ctx context.Context, pool string) ([]units.Worker, error)
	CPUUsage(w units.Worker) (time.Duration, error)
	MemoryUsage(w units.Worker) (usage, limit uint64, limitSet bool, err error)
}

// The cAdvisor names and labels that dashboards and the HPC platform's
// "synthetic container metrics" already use, labelled pool and slot.
var (
	cpuDesc = prometheus.NewDesc("container_cpu_usage_seconds_total",
		"CPU time the worker's cgroup has used.", []string{"pool", "slot", "unit"}, nil)
	memDesc = prometheus.NewDesc("container_memory_usage_bytes",
		"Memory the worker's cgroup uses (memory.current).", []string{"pool", "slot", "unit"}, nil)
	memLimitDesc = prometheus.NewDesc("container_memory_limit_bytes",
		"The worker's memory limit (memory.max); absent without one.", []string{"pool", "slot", "unit"}, nil)
)

// workerCollector reads every running worker's cgroup at scrape time: a
// scrape is the only moment anyone wants the numbers.
type workerCollector struct {
	r WorkerReader
}

func (c *workerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- cpuDesc
	ch <- memDesc
	ch <- memLimitDesc
}

func (c *workerCollector) Collect(ch chan<- prometheus.Metric) {
	if c.r == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ws, err := c.r.ListWorkers(ctx, "")
	if err != nil {
		return
	}
	for _, w := range ws {
		if w.ControlGroup == "" {
			continue // not running
		}
		labels := []string{w.Pool, strconv.Itoa(w.Slot), w.Unit}
		if d, err := c.r.CPUUsage(w); err == nil {
			ch <- prometheus.MustNewConstMetric(cpuDesc, prometheus.CounterValue, d.Seconds(), labels...)
		}
		if usage, limit, limitSet, err := c.r.MemoryUsage(w); err == nil {
			ch <- prometheus.MustNewConstMetric(memDesc, prometheus.GaugeValue, float64(usage), labels...)
			if limitSet {
				ch <- prometheus.MustNewConstMetric(memLimitDesc, prometheus.GaugeValue, float64(limit), labels...)
			}
		}
	}
}
