package probe

import (
	"strings"
	"testing"
	"time"
)

func TestSpecValidate(t *testing.T) {
	ports := []string{"http", "grpc"}
	ok := Spec{Kind: KindHTTP, Path: "/health", Port: "http"}
	tests := []struct {
		name string
		edit func(*Spec)
		want string // substring of the error; "" for valid
	}{
		{"defaults are valid", func(*Spec) {}, ""},
		{"tcp", func(s *Spec) { s.Kind, s.Path = KindTCP, "" }, ""},
		{"command", func(s *Spec) { s.Kind, s.Port, s.Command = KindCommand, "", []string{"/bin/true"} }, ""},
		{"command relative", func(s *Spec) { s.Kind, s.Command = KindCommand, []string{"true"} }, "command = "},
		{"command empty", func(s *Spec) { s.Kind, s.Command = KindCommand, nil }, "command = "},
		{"kind missing", func(s *Spec) { s.Kind = "" }, "kind: missing"},
		{"kind unknown", func(s *Spec) { s.Kind = "grpc" }, `kind = "grpc"`},
		{"port undeclared", func(s *Spec) { s.Port = "metrics" }, `port = "metrics": not declared`},
		{"tcp port undeclared", func(s *Spec) { s.Kind, s.Port = KindTCP, "x" }, `port = "x"`},
		{"port missing", func(s *Spec) { s.Port = "" }, "port: missing"},
		{"path relative", func(s *Spec) { s.Path = "health" }, "path = "},
		{"path with space", func(s *Spec) { s.Path = "/a b" }, "path = "},
		{"period too short", func(s *Spec) { s.Period, s.Timeout = 500*time.Millisecond, 100*time.Millisecond }, "period_sec = 0.5"},
		{"period too long", func(s *Spec) { s.Period = 2 * time.Hour }, "period_sec = 7200"},
		{"timeout above period", func(s *Spec) { s.Period, s.Timeout = time.Second, 2*time.Second }, "timeout_sec = 2: must not be longer than period_sec (1)"},
		{"timeout too short", func(s *Spec) { s.Timeout = time.Millisecond }, "timeout_sec = 0.001"},
		{"negative delay", func(s *Spec) { s.InitialDelay = -time.Second }, "initial_delay_sec = -1"},
		{"success threshold negative", func(s *Spec) { s.SuccessThreshold = -1 }, "success_threshold = -1"},
		{"failure threshold huge", func(s *Spec) { s.FailureThreshold = 5000 }, "failure_threshold = 5000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := ok
			tc.edit(&s)
			err := s.WithDefaults().Validate(`pool "web": readiness`, ports)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), `pool "web": readiness: `) {
				t.Fatalf("Validate = %v, want an error with the prefix and %q", err, tc.want)
			}
		})
	}
}

func TestWithDefaults(t *testing.T) {
	got := Spec{}.WithDefaults()
	if got.Period != 10*time.Second || got.Timeout != time.Second || got.SuccessThreshold != 1 || got.FailureThreshold != 3 {
		t.Errorf("WithDefaults = %+v, want Kubernetes' defaults", got)
	}
	set := Spec{Period: 2 * time.Second, Timeout: time.Second / 2, SuccessThreshold: 2, FailureThreshold: 5}
	if d := set.WithDefaults(); d.Period != set.Period || d.Timeout != set.Timeout || d.SuccessThreshold != 2 || d.FailureThreshold != 5 {
		t.Errorf("WithDefaults changed set fields: %+v", set.WithDefaults())
	}
}
