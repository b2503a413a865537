package discovery

import (
	"fmt"
	"testing"
)

func replicas200() Set {
	rs := make([]Replica, 200)
	for i := range rs {
		rs[i] = Replica{
			Slot: i + 1, Unit: fmt.Sprintf("flexiq-web@%d.service", i+1), Address: "127.0.0.1",
			Ports: map[string]int{"http": 8001 + i, "metrics": 9001 + i},
		}
	}
	return NewSet("web", rs)
}

// BenchmarkRender200 renders the JSON, file_sd and nginx outputs of 200
// replicas: the cost of one change of the ready set, writes aside.
func BenchmarkRender200(b *testing.B) {
	tm, err := ParseTemplate("nginx", nginxTemplate)
	if err != nil {
		b.Fatal(err)
	}
	t := &Template{tmpl: tm}
	s := replicas200()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := RenderJSON(s); err != nil {
			b.Fatal(err)
		}
		if _, err := RenderFileSD(s, "metrics"); err != nil {
			b.Fatal(err)
		}
		if _, err := t.Render(s); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPublishUnchanged200 is a Publish of 200 replicas whose files are
// current: render and compare, no write. A loop that publishes on every
// tick pays this.
func BenchmarkPublishUnchanged200(b *testing.B) {
	f := newFixture(b)
	s := replicas200()
	if _, err := f.p.Publish(s); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		res, err := f.p.Publish(s)
		if err != nil || len(res.Changed) != 0 {
			b.Fatal(err, res)
		}
	}
}

// BenchmarkPublishChanged200 alternates 200 and 199 replicas: every
// Publish rewrites all four files.
func BenchmarkPublishChanged200(b *testing.B) {
	f := newFixture(b)
	sets := []Set{replicas200(), replicas200().Without(100)}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		res, err := f.p.Publish(sets[i%2])
		if err != nil || len(res.Changed) != 4 {
			b.Fatal(err, res)
		}
		i++
	}
}

// BenchmarkPublishCompare200 forces the rendering of 200 unchanged
// replicas (Retry) and its comparison with the files: what a Publish costs
// when the set changed but no file did, and the upper bound of an
// unchanged Publish without the set short cut.
func BenchmarkPublishCompare200(b *testing.B) {
	f := newFixture(b)
	s := replicas200()
	if _, err := f.p.Publish(s); err != nil {
		b.Fatal(err)
	}
	json := f.p.Paths()[0]
	b.ReportAllocs()
	for b.Loop() {
		f.p.Retry(json)
		res, err := f.p.Publish(s)
		if err != nil || len(res.Changed) != 1 {
			b.Fatal(err, res)
		}
	}
}
