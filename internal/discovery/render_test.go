package discovery

import (
	"encoding/json"
	"reflect"
	"testing"
)

func twoReplicas() Set {
	// Given out of order, to check that NewSet sorts.
	return NewSet("web", []Replica{
		{Slot: 2, Unit: "flexiq-web@2.service", Address: "127.0.0.1", Ports: map[string]int{"http": 8002, "metrics": 9002}},
		{Slot: 1, Unit: "flexiq-web@1.service", Address: "127.0.0.1", Ports: map[string]int{"metrics": 9001, "http": 8001}},
	})
}

func TestRenderJSON(t *testing.T) {
	tests := []struct {
		name string
		set  Set
		want string
	}{
		{"empty", NewSet("web", nil), `{
  "schema": 1,
  "pool": "web",
  "replicas": []
}
`},
		{"two sorted", twoReplicas(), `{
  "schema": 1,
  "pool": "web",
  "replicas": [
    {
      "slot": 1,
      "unit": "flexiq-web@1.service",
      "address": "127.0.0.1",
      "ports": {
        "http": 8001,
        "metrics": 9001
      },
      "rank": 0
    },
    {
      "slot": 2,
      "unit": "flexiq-web@2.service",
      "address": "127.0.0.1",
      "ports": {
        "http": 8002,
        "metrics": 9002
      },
      "rank": 0
    }
  ]
}
`},
		{"gang ranks, no ports", NewSet("g", []Replica{
			{Slot: 1, Unit: "u1", Address: "::1", Rank: 1},
			{Slot: 1, Unit: "u0", Address: "::1", Rank: 0},
		}), `{
  "schema": 1,
  "pool": "g",
  "replicas": [
    {
      "slot": 1,
      "unit": "u0",
      "address": "::1",
      "ports": {},
      "rank": 0
    },
    {
      "slot": 1,
      "unit": "u1",
      "address": "::1",
      "ports": {},
      "rank": 1
    }
  ]
}
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := RenderJSON(tt.set)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
			if !json.Valid(got) {
				t.Error("not valid JSON")
			}
		})
	}
}

func TestRenderFileSD(t *testing.T) {
	tests := []struct {
		name   string
		set    Set
		port   string
		want   []TargetGroup
		golden string
	}{
		{"empty", NewSet("web", nil), "metrics", []TargetGroup{}, "[]\n"},
		{"two", twoReplicas(), "metrics", []TargetGroup{
			{Targets: []string{"127.0.0.1:9001"}, Labels: map[string]string{"flexiq_pool": "web", "flexiq_slot": "1"}},
			{Targets: []string{"127.0.0.1:9002"}, Labels: map[string]string{"flexiq_pool": "web", "flexiq_slot": "2"}},
		}, `[
  {
    "targets": [
      "127.0.0.1:9001"
    ],
    "labels": {
      "flexiq_pool": "web",
      "flexiq_slot": "1"
    }
  },
  {
    "targets": [
      "127.0.0.1:9002"
    ],
    "labels": {
      "flexiq_pool": "web",
      "flexiq_slot": "2"
    }
  }
]
`},
		{"gang: rank 0 only, IPv6 bracketed", NewSet("g", []Replica{
			{Slot: 3, Unit: "u0", Address: "fd00::1", Ports: map[string]int{"m": 9100}},
			{Slot: 3, Unit: "u1", Address: "fd00::1", Ports: map[string]int{"m": 9101}, Rank: 1},
		}), "m", []TargetGroup{
			{Targets: []string{"[fd00::1]:9100"}, Labels: map[string]string{"flexiq_pool": "g", "flexiq_slot": "3"}},
		}, ""},
		{"replica without the port left out", NewSet("web", []Replica{
			{Slot: 1, Unit: "u1", Address: "127.0.0.1", Ports: map[string]int{"http": 80}},
			{Slot: 2, Unit: "u2", Address: "127.0.0.1", Ports: map[string]int{"metrics": 9002}},
		}), "metrics", []TargetGroup{
			{Targets: []string{"127.0.0.1:9002"}, Labels: map[string]string{"flexiq_pool": "web", "flexiq_slot": "2"}},
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := RenderFileSD(tt.set, tt.port)
			if err != nil {
				t.Fatal(err)
			}
			if tt.golden != "" && string(got) != tt.golden {
				t.Errorf("got\n%s\nwant\n%s", got, tt.golden)
			}
			// Read it back as Prometheus does: a list of static configs.
			var groups []struct {
				Targets []string          `json:"targets"`
				Labels  map[string]string `json:"labels"`
			}
			if err := json.Unmarshal(got, &groups); err != nil {
				t.Fatalf("does not parse as file_sd: %v", err)
			}
			if groups == nil {
				t.Fatal("decoded to null, want a list")
			}
			if len(groups) != len(tt.want) {
				t.Fatalf("%d groups, want %d", len(groups), len(tt.want))
			}
			for i := range groups {
				if !reflect.DeepEqual(groups[i].Targets, tt.want[i].Targets) || !reflect.DeepEqual(groups[i].Labels, tt.want[i].Labels) {
					t.Errorf("group %d = %+v, want %+v", i, groups[i], tt.want[i])
				}
			}
		})
	}
}

func TestRenderIsDeterministic(t *testing.T) {
	a, b := twoReplicas(), NewSet("web", []Replica{twoReplicas().Replicas[0], twoReplicas().Replicas[1]})
	for name, render := range map[string]func(Set) ([]byte, error){
		"json":    RenderJSON,
		"file_sd": func(s Set) ([]byte, error) { return RenderFileSD(s, "metrics") },
	} {
		x, _ := render(a)
		y, _ := render(b)
		if string(x) != string(y) {
			t.Errorf("%s: two renderings of one set differ", name)
		}
	}
}

func TestSetWithoutAndLeaders(t *testing.T) {
	s := NewSet("g", []Replica{
		{Slot: 1, Unit: "a0"}, {Slot: 1, Unit: "a1", Rank: 1},
		{Slot: 2, Unit: "b0"}, {Slot: 2, Unit: "b1", Rank: 1},
		{Slot: 3, Unit: "c0"},
	})
	units := func(rs []Replica) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.Unit)
		}
		return out
	}
	tests := []struct {
		name string
		got  []string
		want []string
	}{
		{"without 2", units(s.Without(2).Replicas), []string{"a0", "a1", "c0"}},
		{"without 1 and 3", units(s.Without(1, 3).Replicas), []string{"b0", "b1"}},
		{"without none", units(s.Without().Replicas), []string{"a0", "a1", "b0", "b1", "c0"}},
		{"leaders", units(s.Leaders()), []string{"a0", "b0", "c0"}},
	}
	for _, tt := range tests {
		if !reflect.DeepEqual(tt.got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, tt.got, tt.want)
		}
	}
	if len(s.Replicas) != 5 {
		t.Error("Without changed the set it was called on")
	}
}
