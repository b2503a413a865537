package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestDropIns(t *testing.T) {
	const main = "[daemon]\npoll_interval_sec = 2\n"
	web := "[pools.web]\napp = \"web.tasks:queue\"\n[pools.web.source]\npath = \"/var/lib/flexiq/web.db\"\n"
	mail := "[pools.mail]\napp = \"mail.tasks:queue\"\n[pools.mail.source]\npath = \"/var/lib/flexiq/mail.db\"\n"
	tests := []struct {
		name    string
		main    string
		dropIns map[string]string // file name in conf.d → text
		pools   map[string]string // pool → the base name of the file that defines it
		files   []string          // drop-ins read, in order
		errs    []string          // "FILE: KEY: MSG" substrings, FILE a base name
	}{
		{name: "no conf.d", main: main + web, pools: map[string]string{"web": "config.toml"}},
		{name: "one pool per file, lexical order", main: main,
			dropIns: map[string]string{"20-web.toml": web, "10-mail.toml": mail},
			pools:   map[string]string{"web": "20-web.toml", "mail": "10-mail.toml"},
			files:   []string{"10-mail.toml", "20-web.toml"}},
		{name: "several pools in one file", main: main, dropIns: map[string]string{"all.toml": web + mail},
			pools: map[string]string{"web": "all.toml", "mail": "all.toml"}, files: []string{"all.toml"}},
		{name: "beside config.toml's own pools", main: main + web, dropIns: map[string]string{"mail.toml": mail},
			pools: map[string]string{"web": "config.toml", "mail": "mail.toml"}, files: []string{"mail.toml"}},
		{name: "other names are skipped", main: main + web,
			dropIns: map[string]string{".mail.toml": mail, "mail.toml.dpkg-old": mail, "mail.conf": mail, ".toml": mail},
			pools:   map[string]string{"web": "config.toml"}},
		{name: "a pool twice: config.toml and a drop-in", main: main + web, dropIns: map[string]string{"web.toml": web},
			errs: []string{`web.toml: pools.web: pool "web" is already defined in ` + "CONFIG"}},
		{name: "a pool twice: two drop-ins", main: main, dropIns: map[string]string{"a.toml": web, "b.toml": web + mail},
			errs: []string{`b.toml: pools.web: pool "web" is already defined in ` + "DIR/a.toml"}},
		{name: "a drop-in may not set [daemon]", main: main, dropIns: map[string]string{"d.toml": "[daemon]\npoll_interval_sec = 1\n" + web},
			errs: []string{"d.toml: daemon: a drop-in holds [pools.NAME] tables only; [daemon] belongs in CONFIG"}},
		{name: "a drop-in may not set [capacity] or [host_guard]", main: main,
			dropIns: map[string]string{"d.toml": "[capacity]\nreserve_cores = 1\n[host_guard]\n"},
			errs:    []string{"d.toml: capacity: a drop-in holds", "d.toml: host_guard: a drop-in holds"}},
		{name: "a value problem names its drop-in", main: main,
			dropIns: map[string]string{"web.toml": strings.Replace(web, "[pools.web.source]", "max_workers = -1\n[pools.web.source]", 1)},
			errs:    []string{"web.toml: pools.web.max_workers:"}},
		{name: "a syntax error names its drop-in, and main's too", main: "[daemon\n",
			dropIns: map[string]string{"web.toml": "[pools.web\n"},
			errs:    []string{"config.toml: line 2", "web.toml: line 2"}},
		{name: "an unknown key names its drop-in", main: main,
			dropIns: map[string]string{"web.toml": strings.Replace(web, "[pools.web.source]", "max_worker = 3\n[pools.web.source]", 1)},
			errs:    []string{`web.toml: pools.web.max_worker: unknown key; did you mean "max_workers"?`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, tt.main)
			dir := DropInDir(path)
			if tt.dropIns != nil {
				if err := os.Mkdir(dir, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for name, text := range tt.dropIns {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o640); err != nil {
					t.Fatal(err)
				}
			}
			c, err := Load(path)
			if tt.errs != nil {
				if err == nil {
					t.Fatalf("loaded, want errors %q", tt.errs)
				}
				got := err.Error()
				for _, want := range tt.errs {
					want = strings.ReplaceAll(want, "CONFIG", path)
					want = strings.ReplaceAll(want, "DIR", dir)
					if !strings.Contains(got, want) {
						t.Errorf("errors\n%s\nlack %q", got, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(c.Pools) != len(tt.pools) {
				t.Errorf("pools %v, want %v", c.Pools, tt.pools)
			}
			for name, file := range tt.pools {
				if c.Pools[name] == nil {
					t.Errorf("no pool %s", name)
				}
				if got := filepath.Base(c.FileOf(name)); got != file {
					t.Errorf("pool %s from %s, want %s", name, got, file)
				}
			}
			var files []string
			for _, f := range c.DropIns {
				files = append(files, filepath.Base(f))
			}
			if !slices.Equal(files, tt.files) {
				t.Errorf("drop-ins %q, want %q", files, tt.files)
			}
		})
	}
}

// A drop-in that is not a regular file is refused by name, never followed:
// a link to a root-only secret must not be read as configuration.
func TestDropInNotRegular(t *testing.T) {
	for _, tt := range []struct {
		name string
		make func(t *testing.T, path, secret string)
		want string
	}{
		{"symlink to a secret", func(t *testing.T, path, secret string) {
			if err := os.Symlink(secret, path); err != nil {
				t.Fatal(err)
			}
		}, "is a symbolic link: drop-ins must be regular files"},
		{"dangling symlink", func(t *testing.T, path, _ string) {
			if err := os.Symlink("/nonexistent/x.toml", path); err != nil {
				t.Fatal(err)
			}
		}, "is a symbolic link: drop-ins must be regular files"},
		{"directory", func(t *testing.T, path, _ string) {
			if err := os.Mkdir(path, 0o755); err != nil {
				t.Fatal(err)
			}
		}, "is a directory: drop-ins must be regular files"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, "")
			dir := DropInDir(path)
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			secret := filepath.Join(t.TempDir(), "secret.toml")
			if err := os.WriteFile(secret, []byte("[pools.web]\napp = \"hunter2:x\"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			link := filepath.Join(dir, "web.toml")
			tt.make(t, link, secret)
			_, err := Load(path)
			if err == nil || !strings.Contains(err.Error(), link+" "+tt.want) {
				t.Fatalf("Load: %v, want an error naming %s: %q", err, link, tt.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("the link's target was read: %v", err)
			}
		})
	}
}
