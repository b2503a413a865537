package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/flexiq/flexiq-scaled/internal/safefile"
)

// Drop-ins: configuration management tools (Ansible, Puppet, Salt, a
// package of one's own) manage a service by dropping one file per thing it
// owns, rather than editing a shared file. The daemon reads config.toml,
// then every *.toml of conf.d beside it, in lexical order.
//
// A drop-in holds [pools.NAME] tables and nothing else: [daemon],
// [host_guard] and [capacity] are the host's, and belong in config.toml,
// where one file decides them. A pool defined by two files is an error that
// names both, not "the later file wins" as in systemd: a pool is one
// definition (its command, its user, its limits), and two tools or two
// roles dropping the same pool is a mistake to surface at check-config,
// not to resolve silently by file name, where the loser's settings would
// vanish without a word.

// DropInDir is the drop-in directory of the configuration file at path:
// conf.d beside it, as /etc/flexiq-scaled/conf.d for the default path.
func DropInDir(path string) string {
	return filepath.Join(filepath.Dir(path), "conf.d")
}

// dropIn is one drop-in file, read.
type dropIn struct {
	path string
	data []byte
}

// isDropIn tells whether a directory entry's name is one the daemon reads:
// *.toml, not hidden (editors' and dpkg's leftovers, such as
// .web.toml.swp or web.toml.dpkg-old, are skipped by the same rule).
func isDropIn(name string) bool {
	return strings.HasSuffix(name, ".toml") && !strings.HasPrefix(name, ".") && len(name) > len(".toml")
}

// DropInFiles lists the drop-ins of dir in the order they are read. A
// missing directory has none.
func DropInFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir) // sorted by name
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read drop-in directory: %w", err)
	}
	var files []string
	for _, e := range entries {
		if isDropIn(e.Name()) {
			files = append(files, filepath.Join(dir, e.Name()))
		}
	}
	return files, nil
}

func readDropIns(dir string) ([]dropIn, error) {
	files, err := DropInFiles(dir)
	if err != nil {
		return nil, err
	}
	var out []dropIn
	for _, f := range files {
		data, err := ReadDropIn(f)
		if err != nil {
			return nil, err
		}
		out = append(out, dropIn{path: f, data: data})
	}
	return out, nil
}

// ReadDropIn reads one drop-in, which must be a regular file. A symbolic
// link is refused rather than followed: conf.d is where `pool add` copies
// and restores files, and a link there to a root-only secret would have its
// target read, parsed (and quoted in errors) and copied as a drop-in.
// O_NOFOLLOW closes the window between the check and the read.
func ReadDropIn(path string) ([]byte, error) {
	if err := CheckDropInFile(path); err != nil {
		return nil, err
	}
	f, _, err := safefile.Open(path)
	if err != nil {
		var nr *safefile.NotRegularError
		if errors.As(err, &nr) {
			return nil, fmt.Errorf("read config drop-in %s: it is %s; drop-ins must be regular files", path, nr.What())
		}
		return nil, fmt.Errorf("read config drop-in: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("read config drop-in: %w", err)
	}
	return data, nil
}

// CheckDropInFile refuses a drop-in path that exists and is not a regular
// file (a symbolic link, a directory, a FIFO, a device), naming it and what
// it is. A path that does not exist passes: the caller decides about that.
func CheckDropInFile(path string) error {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("config drop-in: %w", err)
	case fi.Mode().IsRegular():
		return nil
	}
	what := "not a regular file"
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		what = "a symbolic link"
	case fi.IsDir():
		what = "a directory"
	}
	return fmt.Errorf("config drop-in %s is %s: drop-ins must be regular files", path, what)
}

// mergeDropIns decodes each drop-in and adds its pools to raw, reporting
// under the drop-in's name what it may not hold and a pool that another
// file already defines. It returns which drop-in defined each of its pools.
func (l *loader) mergeDropIns(raw *rawFile, dropIns []dropIn) map[string]string {
	main := l.file
	defer func() { l.file = main }()
	origin := map[string]string{}
	fileOf := func(name string) string {
		if f, ok := origin[name]; ok {
			return f
		}
		return main
	}
	for _, d := range dropIns {
		l.file = d.path
		var r rawFile
		md, ok := l.decodeFile(d.data, &r)
		if !ok {
			continue
		}
		// Top-level keys other than pools, reported once each.
		var reported []string
		for _, k := range md.Keys() {
			if k[0] == "pools" || slices.Contains(reported, k[0]) {
				continue
			}
			reported = append(reported, k[0])
			l.add(toml.Key{k[0]}.String(), "a drop-in holds [pools.NAME] tables only; [%s] belongs in %s", k[0], main)
		}
		for _, name := range slices.Sorted(maps.Keys(r.Pools)) {
			if _, dup := raw.Pools[name]; dup {
				l.add(poolKeyName(name), "pool %q is already defined in %s: a pool is defined by one file only "+
					"(remove one of the two definitions)", name, fileOf(name))
				continue
			}
			if raw.Pools == nil {
				raw.Pools = map[string]rawPool{}
			}
			raw.Pools[name] = r.Pools[name]
			origin[name] = d.path
		}
	}
	return origin
}

func poolKeyName(name string) string { return toml.Key{"pools", name}.String() }

// FileOf names the file that defines pool name: a drop-in, or Path.
func (c *Config) FileOf(name string) string {
	if f, ok := c.PoolFiles[name]; ok {
		return f
	}
	return c.Path
}

// Files are every file of the configuration: Path, then the drop-ins.
func (c *Config) Files() []string {
	return append([]string{c.Path}, c.DropIns...)
}
