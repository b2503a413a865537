package tickcsv

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// The ticks cross the pipe to the plot helper intact, in the fields that a
// picture draws.
func TestRoundTrip(t *testing.T) {
	ticks := []Row{{T: 0, Pending: 30, Running: 1, Live: 1}, {T: 2.5, Pending: 5, Running: 3, Live: 3, Draining: 1}}
	var b bytes.Buffer
	if err := Write(&b, ticks); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), "t,pending,running,live,draining\n0,30,1,1,0\n2.5,5,3,3,1\n") {
		t.Errorf("CSV %q", b.String())
	}
	got, err := Read(&b)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, ticks) {
		t.Errorf("read %+v, want %+v", got, ticks)
	}
	for _, bad := range []string{"", "time,pending,running,live,target,action\n", "t,pending,running,live,draining\n1,x,1,1,0\n"} {
		if _, err := Read(strings.NewReader(bad)); err == nil {
			t.Errorf("Read(%q) took it", bad)
		}
	}
}
