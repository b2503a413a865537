package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/flexiq/flexiq-scaled/internal/policy"
)

// SourceNone is the source type of a pool with no queue: a service pool
// (Pool.Service) whose [pools.NAME.source] table is left out, or says
// type = "none". Its decisions come from its rules and the CPU signal.
const SourceNone = "none"

// NoQueue says the pool reads no queue.
func (p *Pool) NoQueue() bool { return p.Source.Type == SourceNone }

// defaultSourceType is the type of a pool whose source table names none:
// none for a service pool without a source table, DefaultSourceType
// otherwise, as before services.
func defaultSourceType(p *Pool, r rawSourceTable) string {
	if p.IsService() && len(r) == 0 {
		return SourceNone
	}
	return DefaultSourceType
}

// noQueue checks a pool without a queue: only a service's replicas may
// have none, and what would read the queue has nothing to read. After
// scaling, whose rules it reads.
func (l *loader) noQueue(p *Pool, r *rawPool, key func(...string) string) {
	if !p.NoQueue() {
		return
	}
	if !p.IsService() {
		l.add(key("source", "type"), "%q is only for a service pool ([pools.%s.service]): a pool of queue workers reads its queue", SourceNone, p.Name)
		return
	}
	for _, k := range []struct {
		name string
		set  bool
	}{
		{"target_queue_latency_sec", r.TargetQueueLatencySec.set()},
		{"keep_warm_workers", r.KeepWarmWorkers.set()},
		{"target_queue_depth_per_worker", r.TargetQueueDepthPerWorker.set()},
	} {
		if k.set {
			l.add(key(k.name), "reads the queue, and the pool has none (no [pools.%s.source])", p.Name)
		}
	}
	switch {
	case p.Scaling.Policy == PolicyRules:
		l.noQueueRules(p, key)
	case p.TargetCPUUtilisation == 0 && p.MinWorkers != p.MaxWorkers:
		l.add(key("target_cpu_utilisation"), `a pool without a queue scales on the CPU signal or on rules: set target_cpu_utilisation, or policy = "rules" (or min_workers = max_workers for a fixed size)`)
	case p.TargetCPUUtilisation > 0 && p.MinWorkers < 1 && p.Service.WakeAddress() == "":
		// A wake address starts one: the first request does (issue 29).
		l.add(key("min_workers"), "must be >= 1 for a pool without a queue that scales on the CPU signal: with no replica there is no CPU to read, and nothing would start one (a wake address, [%s], would)", poolKey(p, "service", "wake"))
	}
}

// noQueueRules refuses the rules that read the queue's signals.
func (l *loader) noQueueRules(p *Pool, key func(...string) string) {
	check := func(k string, r policy.Rule) {
		c, err := policy.CompileRule(r)
		if err != nil {
			return // reported by rule
		}
		var queue []string
		for _, s := range c.Signals {
			if slices.Contains(policy.QueueSignals, s) {
				queue = append(queue, s)
			}
		}
		if len(queue) > 0 {
			l.add(k, "reads %s, from the queue, and the pool has none (no [pools.%s.source])", strings.Join(queue, ", "), p.Name)
		}
	}
	for i, r := range p.Scaling.ScaleUp {
		check(fmt.Sprintf("%s[%d].when", key("scale_up"), i), r)
	}
	if r := p.Scaling.ScaleDown; r != nil {
		check(key("scale_down")+".when", *r)
	}
}
