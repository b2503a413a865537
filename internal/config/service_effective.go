package config

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/flexiq/flexiq-scaled/internal/discovery"
)

// How WriteEffective writes [pools.NAME.service], and how Diff compares it.

type effectiveService struct {
	Address           string           `toml:"address"`
	MetricsPort       string           `toml:"metrics_port,omitempty"`
	DiscoveryDir      string           `toml:"discovery_dir"`
	DrainPeriodSec    float64          `toml:"drain_period_sec"`
	ReadyTimeoutSec   float64          `toml:"ready_timeout_sec"`
	UnreadyTimeoutSec float64          `toml:"unready_timeout_sec"`
	GroupSize         int              `toml:"group_size"`
	CPUSetSplit       bool             `toml:"cpuset_split"`
	Ports             map[string]any   `toml:"ports,omitempty"`
	Readiness         map[string]any   `toml:"readiness"`
	Template          []map[string]any `toml:"template,omitempty"`
	Wake              *effectiveWake   `toml:"wake,omitempty"`
}

type effectiveWake struct {
	Listen         string  `toml:"listen"`
	Port           string  `toml:"port"`
	Mode           string  `toml:"mode"`
	HoldTimeoutSec float64 `toml:"hold_timeout_sec"`
}

func (s *Service) effective() *effectiveService {
	if s == nil {
		return nil
	}
	e := &effectiveService{
		Address:           s.Address,
		MetricsPort:       s.MetricsPort,
		DiscoveryDir:      s.DiscoveryDir,
		DrainPeriodSec:    s.DrainPeriod.Seconds(),
		ReadyTimeoutSec:   s.ReadyTimeout.Seconds(),
		UnreadyTimeoutSec: s.UnreadyTimeout.Seconds(),
		GroupSize:         s.GroupSize,
		CPUSetSplit:       s.CPUSetSplit,
		Readiness:         map[string]any{"type": s.Readiness.Kind},
	}
	if len(s.Ports) > 0 {
		e.Ports = map[string]any{}
		for _, p := range s.Ports {
			var v any = "auto"
			if p.Base > 0 {
				v = p.Base
			}
			if p.Socket {
				v = map[string]any{"port": v, "socket": true}
			}
			e.Ports[p.Name] = v
		}
	}
	if pr := s.Readiness.Probe; pr.Kind != "" {
		r := e.Readiness
		if k, ok := readinessKindOf(s.Readiness.Kind); ok {
			k.effective(s.Readiness, r)
		}
		r["initial_delay_sec"] = pr.InitialDelay.Seconds()
		r["period_sec"] = pr.Period.Seconds()
		r["timeout_sec"] = pr.Timeout.Seconds()
		r["success_threshold"] = pr.SuccessThreshold
		r["failure_threshold"] = pr.FailureThreshold
	}
	if w := s.Wake; w.Listen != "" {
		e.Wake = &effectiveWake{Listen: w.Listen, Port: w.Port, Mode: w.Mode, HoldTimeoutSec: w.HoldTimeout.Seconds()}
	}
	for _, t := range s.Templates {
		m := map[string]any{
			"source":      t.Spec.Source,
			"destination": t.Spec.Destination,
			"mode":        fmt.Sprintf("%04o", uint32(t.Spec.Mode.Perm())),
		}
		if a := t.Spec.After; a != nil {
			m["after_change"] = a.Argv()
			m["after_change_timeout_sec"] = a.Timeout.Seconds()
		}
		e.Template = append(e.Template, m)
	}
	return e
}

// diffService names the keys of [pools.NAME.service] that differ. The
// templates are compared by their specs and their text, since a parsed
// template holds functions, which reflect.DeepEqual never finds equal, and
// an edited template file is a change although the path stays.
func diffService(a, b *Service, prefix string) []string {
	switch {
	case a == nil && b == nil:
		return nil
	case a == nil || b == nil:
		return []string{prefix}
	}
	ac, bc := *a, *b
	ac.Templates, bc.Templates = nil, nil
	keys := diffStruct(reflect.ValueOf(ac), reflect.ValueOf(bc), prefix+".")
	if !slices.EqualFunc(a.Templates, b.Templates, sameTemplate) {
		keys = append(keys, prefix+".template")
	}
	slices.Sort(keys)
	return keys
}

func sameTemplate(a, b *discovery.Template) bool {
	return reflect.DeepEqual(a.Spec, b.Spec) && a.Text() == b.Text()
}
