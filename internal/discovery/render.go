package discovery

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// SchemaVersion is the "schema" field of the JSON file; it changes only
// when a field changes meaning or goes away, never when one is added.
const SchemaVersion = 1

// jsonFile is the JSON file's schema:
//
//	{
//	  "schema": 1,
//	  "pool": "web",
//	  "replicas": [
//	    {"slot": 1, "unit": "flexiq-web@1.service", "address": "127.0.0.1",
//	     "ports": {"http": 8001, "metrics": 9001}, "rank": 0}
//	  ]
//	}
//
// replicas is sorted by slot then rank, [] when none is ready; ports is {}
// when the pool declares none; rank is 0 outside gang groups, and a gang
// group lists each of its ranks under the group's slot.
type jsonFile struct {
	Schema   int           `json:"schema"`
	Pool     string        `json:"pool"`
	Replicas []jsonReplica `json:"replicas"`
}

type jsonReplica struct {
	Slot    int            `json:"slot"`
	Unit    string         `json:"unit"`
	Address string         `json:"address"`
	Ports   map[string]int `json:"ports"`
	Rank    int            `json:"rank"`
}

// RenderJSON is the JSON file of s (schema at jsonFile), indented, with a
// final newline. encoding/json writes map keys sorted, so the bytes depend
// only on s.
func RenderJSON(s Set) ([]byte, error) {
	f := jsonFile{Schema: SchemaVersion, Pool: s.Pool, Replicas: make([]jsonReplica, len(s.Replicas))}
	for i, r := range s.Replicas {
		ports := r.Ports
		if ports == nil {
			ports = map[string]int{}
		}
		f.Replicas[i] = jsonReplica{Slot: r.Slot, Unit: r.Unit, Address: r.Address, Ports: ports, Rank: r.Rank}
	}
	return marshal(f, "discovery file of pool "+s.Pool)
}

// TargetGroup is one entry of a Prometheus file_sd file: Prometheus reads
// a JSON list of static configs, each {"targets": ["host:port", ...],
// "labels": {...}} (file_sd_config in Prometheus' configuration docs).
type TargetGroup struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels"`
}

// Labels of every file_sd target: the pool and the slot, as the
// platform's fuzzball_service and fuzzball_replica.
const (
	LabelPool = "flexiq_pool"
	LabelSlot = "flexiq_slot"
)

// RenderFileSD is the file_sd file of s: one target group per replica
// with Rank 0 (a gang group is scraped through rank 0, issue 19 item 5),
// its target the replica's metricsPort. A replica without that port is
// left out rather than failing the whole file, so that one odd replica
// cannot stop the others' scraping; config checks that the pool declares
// the port. An empty set is "[]", which Prometheus reads as no targets.
func RenderFileSD(s Set, metricsPort string) ([]byte, error) {
	groups := make([]TargetGroup, 0, len(s.Replicas))
	for _, r := range s.Replicas {
		if r.Rank != 0 {
			continue
		}
		hp, err := r.HostPort(metricsPort)
		if err != nil {
			continue
		}
		groups = append(groups, TargetGroup{
			Targets: []string{hp},
			Labels:  map[string]string{LabelPool: s.Pool, LabelSlot: strconv.Itoa(r.Slot)},
		})
	}
	return marshal(groups, "file_sd file of pool "+s.Pool)
}

func marshal(v any, what string) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("rendering the %s: %w", what, err)
	}
	return append(b, '\n'), nil
}
