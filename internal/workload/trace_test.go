package workload

import (
	"bytes"
	"strings"
	"testing"
)

func TestParseService(t *testing.T) {
	tests := []struct {
		expr string
		want ServiceModel
		err  string
	}{
		{"1 + 0.05*GeneratedTokens", ServiceModel{Base: 1, PerGenerated: 0.05}, ""},
		{"0.2+GeneratedTokens*0.01", ServiceModel{Base: 0.2, PerGenerated: 0.01}, ""},
		{"0.5 + 0.001*ContextTokens + 0.02*generatedtokens", ServiceModel{Base: 0.5, PerGenerated: 0.02, PerContext: 0.001}, ""},
		{"3", ServiceModel{Base: 3}, ""},
		{"", ServiceModel{}, "empty"},
		{"1 + 0.05*Tokens", ServiceModel{}, `"Tokens" is neither a number`},
		{"GeneratedTokens*ContextTokens", ServiceModel{}, "at most one"},
	}
	for _, tt := range tests {
		got, err := ParseService(tt.expr)
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("ParseService(%q) error %v, want %q", tt.expr, err, tt.err)
		case tt.err == "" && (err != nil || got != tt.want):
			t.Errorf("ParseService(%q) = %+v, %v; want %+v", tt.expr, got, err, tt.want)
		}
	}
}

func TestReadTrace(t *testing.T) {
	tests := []struct {
		name, text string
		want       []Job
		err        string
	}{
		{"arrival,service, sorted and made relative", "arrival,service\n5,1\n3,2\n", []Job{{0, 2}, {2, 1}}, ""},
		{"azure", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.5,100,20\n2023-11-16 18:17:04,7,0\n",
			[]Job{{0, 2}, {0.5, 1}}, ""},
		{"empty", "", nil, "trace is empty"},
		{"unknown header", "t,pending\n1,2\n", nil, `trace header "t,pending"`},
		{"bad number", "arrival,service\n1,x\n", nil, `trace line 2: service "x" is not a number`},
		{"negative service", "arrival,service\n1,-1\n", nil, "trace line 2: service -1 must be >= 0"},
		{"bad timestamp", "TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,1,1\n", nil, `trace line 2: TIMESTAMP "yesterday"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadTrace(strings.NewReader(tt.text), DefaultService)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || len(got) != len(tt.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tt.want)
			}
			for i := range got {
				if !near(got[i].Arrival, tt.want[i].Arrival) || !near(got[i].Service, tt.want[i].Service) {
					t.Errorf("job %d = %+v, want %+v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestGenerate(t *testing.T) {
	for _, kind := range []string{GenPoisson, GenDiurnal, GenOnOff} {
		spec := GenSpec{Kind: kind, Duration: 3600, Rate: 2, MeanService: 2, MinService: 0.5, PeriodSec: 300, OnSec: 60, Seed: 7}
		a, err := Generate(spec)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := Generate(spec)
		var wa, wb bytes.Buffer
		WriteTrace(&wa, a)
		WriteTrace(&wb, b)
		if wa.String() != wb.String() {
			t.Errorf("%s: the same seed gave two traces", kind)
		}
		// The mean rate is Rate: 7,200 arrivals expected, within 5%.
		if n := len(a); n < 6840 || n > 7560 {
			t.Errorf("%s: %d arrivals in an hour at 2/s", kind, n)
		}
		if kind == GenOnOff {
			for _, j := range a {
				if m := j.Arrival - 300*float64(int(j.Arrival/300)); m >= 60 {
					t.Fatalf("onoff: an arrival at %g, in the off part of its period", j.Arrival)
				}
			}
		}
		back, err := ReadTrace(&wa, DefaultService)
		if err != nil || len(back) != len(a) {
			t.Errorf("%s: written trace reads back as %d jobs, %v", kind, len(back), err)
		}
	}
	if _, err := Generate(GenSpec{Kind: "bursty", Duration: 1, Rate: 1}); err == nil {
		t.Error("an unknown kind was accepted")
	}
}
