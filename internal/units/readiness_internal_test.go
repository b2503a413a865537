package units

import (
	"reflect"
	"testing"
)

func TestReadinessProperties(t *testing.T) {
	m := propMap(t, fullSpec(""))
	for _, name := range []string{"Requires", "After"} {
		if got := m[name]; !reflect.DeepEqual(got, []string{"postgresql.service"}) {
			t.Errorf("%s = %v, want [postgresql.service]", name, got)
		}
	}
	if _, ok := m["BindsTo"]; ok {
		t.Error("BindsTo set: a flapping dependency would kill workers mid-job")
	}
	// (sasb): path, argv, ignore_failure. Ignoring failures would make
	// every exit status a pass.
	got := m["ExecCondition"]
	want := []execCommand{{Path: "/bin/sh", Args: []string{"/bin/sh", "-c", "test -e /srv/ready"}, IgnoreFailure: false}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ExecCondition = %#v, want %#v", m["ExecCondition"], want)
	}

	s := fullSpec("")
	s.Requires, s.StartCondition = nil, nil
	m = propMap(t, s)
	for _, name := range []string{"Requires", "After", "ExecCondition"} {
		if _, ok := m[name]; ok {
			t.Errorf("%s set without requires or start_condition", name)
		}
	}
}
