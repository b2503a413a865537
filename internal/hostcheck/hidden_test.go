package hostcheck

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/procfs"
)

// The mount table of a unit with PrivateTmp=yes and ProtectHome=tmpfs, as
// systemd 252 set it up in the sandbox, and of an ordinary host.
const (
	sandboxedMounts = `435 418 0:45 / /tmp rw,nosuid,nodev,relatime shared:250 - tmpfs tmpfs rw
440 418 0:77 / /home rw,relatime shared:259 - tmpfs tmpfs rw
441 418 0:78 / /root rw,relatime shared:260 - tmpfs tmpfs rw
444 436 0:79 / /run/user rw,relatime shared:256 - tmpfs tmpfs rw
446 435 0:45 /systemd-private-a20b8e31e3e345d2970b4401dd79e770-run-u37.service-4cB0Dm/tmp /tmp rw,nosuid,nodev,relatime shared:251 - tmpfs tmpfs rw
448 418 0:40 /var/tmp/systemd-private-a20b8e31e3e345d2970b4401dd79e770-run-u37.service-6ijUQF/tmp /var/tmp rw,relatime shared:262 - overlay overlay rw
`
	hostMounts = `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
35 22 0:31 / /tmp rw,nosuid,nodev shared:17 - tmpfs tmpfs rw
60 22 8:2 / /home rw,relatime shared:30 - ext4 /dev/sda2 rw
70 25 0:50 / /run/user/1000 rw,nosuid,nodev,relatime shared:40 - tmpfs tmpfs rw
`
)

// mountsOf parses a mountinfo fixture with procfs, through the same parser
// that reads /proc/self/mountinfo in hiddenFromUs.
func mountsOf(t *testing.T, table string) []*procfs.MountInfo {
	t.Helper()
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "self"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "self", "mountinfo"), []byte(table), 0o644); err != nil {
		t.Fatal(err)
	}
	fs, err := procfs.NewFS(root)
	if err != nil {
		t.Fatal(err)
	}
	mounts, err := fs.GetMounts()
	if err != nil {
		t.Fatal(err)
	}
	return mounts
}

func TestHiddenIn(t *testing.T) {
	all := []string{"/tmp", "/var/tmp", "/home", "/root", "/run/user"}
	for _, tc := range []struct {
		name   string
		table  string
		hidden []string // the rest of all are in sight
	}{
		{"daemon's sandbox", sandboxedMounts, all},
		{"host", hostMounts, nil},
		{"empty table", "", nil},
		{
			// The last mount on a mount point is the one in sight: a
			// private /tmp under a host's tmpfs hides it, a disk over a
			// tmpfs /home shows it again.
			"stacked mounts",
			`35 22 0:31 / /tmp rw - tmpfs tmpfs rw
446 35 0:31 /systemd-private-0123-u1.service-x/tmp /tmp rw - tmpfs tmpfs rw
60 22 0:77 / /home rw - tmpfs tmpfs rw
61 60 8:2 / /home rw - ext4 /dev/sda2 rw
`,
			[]string{"/tmp"},
		},
		{
			// Only the mount right on the directory counts, not one
			// beneath it or one whose escaped name starts the same.
			"nearby mount points",
			`70 25 0:50 / /run/user/1000 rw - tmpfs tmpfs rw
71 22 0:51 / /root/cache rw - tmpfs tmpfs rw
72 22 0:52 / /home\040old rw - tmpfs tmpfs rw
73 22 0:53 /systemd-private-0123-u1.service-x/tmp /var/tmp/sub rw - tmpfs tmpfs rw
`,
			nil,
		},
		{
			// A tmpfs /tmp or /var/tmp is the host's own unless it
			// comes from a systemd-private-* directory.
			"tmpfs temporary directories",
			`35 22 0:31 / /tmp rw shared:17 - tmpfs tmpfs rw
36 22 0:32 / /var/tmp rw shared:18 master:2 - tmpfs tmpfs rw
`,
			nil,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mounts := mountsOf(t, tc.table)
			for _, dir := range all {
				want := false
				for _, h := range tc.hidden {
					want = want || h == dir
				}
				if got := hiddenIn(mounts, dir); got != want {
					t.Errorf("hiddenIn(%s) = %v, want %v", dir, got, want)
				}
			}
		})
	}
}

// This machine's own mount table parses, so that hiddenFromUs does not say
// no merely because procfs refused the table.
func TestOwnMountsParse(t *testing.T) {
	mounts, err := procfs.GetMounts()
	if err != nil {
		t.Fatalf("procfs.GetMounts: %v", err)
	}
	if len(mounts) == 0 {
		t.Fatal("no mounts in /proc/self/mountinfo")
	}
}
