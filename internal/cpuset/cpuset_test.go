package cpuset

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseAndString(t *testing.T) {
	tests := []struct {
		in      string
		want    Set
		str     string
		wantErr string
	}{
		{in: "", want: Set{}, str: ""},
		{in: "\n", want: Set{}, str: ""},
		{in: "0", want: Set{0}, str: "0"},
		{in: "0-3,6,8-9\n", want: Set{0, 1, 2, 3, 6, 8, 9}, str: "0-3,6,8-9"},
		{in: "3,1,2,1", want: Set{1, 2, 3}, str: "1-3"},
		{in: "0-1,1-2", want: Set{0, 1, 2}, str: "0-2"},
		{in: " 4 , 6 ", want: Set{4, 6}, str: "4,6"},
		{in: "5-5", want: Set{5}, str: "5"},
		{in: "3-1", wantErr: "ends before it starts"},
		{in: "a", wantErr: `"a" is not a CPU number`},
		{in: "-1", wantErr: "is not a CPU number"},
		{in: "+1", wantErr: "is not a CPU number"},
		{in: "1,,2", wantErr: "is not a CPU number"},
		{in: "0-4000000000", wantErr: "beyond"},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Parse(%q) error = %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.in, err)
			continue
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("Parse(%q) = %v, want %v", tt.in, got, tt.want)
		}
		if s := got.String(); s != tt.str {
			t.Errorf("Parse(%q).String() = %q, want %q", tt.in, s, tt.str)
		}
	}
}

func TestSplit(t *testing.T) {
	tests := []struct {
		set     string
		n       int
		want    []string
		wantErr string
	}{
		{set: "0-7", n: 2, want: []string{"0-3", "4-7"}},
		{set: "0-7", n: 3, want: []string{"0-2", "3-5", "6-7"}},
		{set: "0-3,6,8-9", n: 3, want: []string{"0-2", "3,6", "8-9"}},
		{set: "0-2", n: 3, want: []string{"0", "1", "2"}},
		{set: "0-9", n: 1, want: []string{"0-9"}},
		{set: "0-1", n: 3, wantErr: "fewer than the 3 ranks"},
		{set: "", n: 2, wantErr: "fewer than"},
		{set: "0-3", n: 0, wantErr: "0 ranks"},
	}
	for _, tt := range tests {
		s, err := Parse(tt.set)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Split(s, tt.n)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Split(%q, %d) error = %v, want %q", tt.set, tt.n, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("Split(%q, %d): %v", tt.set, tt.n, err)
			continue
		}
		var strs []string
		seen := map[int]bool{}
		for _, part := range got {
			strs = append(strs, part.String())
			for _, c := range part {
				if seen[c] {
					t.Errorf("Split(%q, %d): CPU %d given to two ranks", tt.set, tt.n, c)
				}
				seen[c] = true
			}
		}
		if !slices.Equal(strs, tt.want) {
			t.Errorf("Split(%q, %d) = %q, want %q", tt.set, tt.n, strs, tt.want)
		}
		if len(seen) != len(s) {
			t.Errorf("Split(%q, %d) hands out %d CPUs of %d", tt.set, tt.n, len(seen), len(s))
		}
	}
}

// TestSplitDoesNotAlias: a rank's set is its own; changing it must not
// change the pool's.
func TestSplitDoesNotAlias(t *testing.T) {
	s := Set{0, 1, 2, 3}
	parts, err := Split(s, 2)
	if err != nil {
		t.Fatal(err)
	}
	parts[0][0] = 99
	if s[0] != 0 {
		t.Fatalf("Split's parts alias the input: %v", s)
	}
}

func TestAllowed(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]string
		want    string
		wantErr string
	}{
		{name: "own cgroup", want: "2-3", files: map[string]string{
			selfCgroup: "0::/system.slice/flexiq-scaled.service\n",
			cgroupMount + "/system.slice/flexiq-scaled.service/" + effective: "2-3\n",
			cgroupMount + "/" + effective:                                    "0-7\n",
			onlineCPUs:                                                       "0-15\n",
		}},
		{name: "no cpuset in own cgroup: the root's", want: "0-7", files: map[string]string{
			selfCgroup:                    "0::/system.slice/flexiq-scaled.service\n",
			cgroupMount + "/" + effective: "0-7\n",
			onlineCPUs:                    "0-15\n",
		}},
		{name: "empty effective falls through", want: "0-15", files: map[string]string{
			selfCgroup:                      "0::/a\n",
			cgroupMount + "/a/" + effective: "\n",
			onlineCPUs:                      "0-15\n",
		}},
		{name: "cgroup v1 host: online CPUs", want: "0-3", files: map[string]string{
			selfCgroup: "12:cpuset:/\n1:name=systemd:/init.scope\n",
			onlineCPUs: "0-3\n",
		}},
		{name: "no proc: online CPUs", want: "0,2", files: map[string]string{onlineCPUs: "0,2\n"}},
		{name: "nothing readable", wantErr: "none of", files: map[string]string{}},
		{name: "garbage", wantErr: "not a CPU number", files: map[string]string{onlineCPUs: "x\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for name, content := range tt.files {
				p := filepath.Join(root, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := Allowed(root)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Allowed error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.String() != tt.want {
				t.Fatalf("Allowed = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestAllowedOnThisHost: the real files give a non-empty set.
func TestAllowedOnThisHost(t *testing.T) {
	s, err := Allowed("/")
	if err != nil {
		t.Fatal(err)
	}
	if len(s) == 0 {
		t.Fatal("no CPUs allowed")
	}
}
