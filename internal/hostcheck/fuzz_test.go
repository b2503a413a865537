package hostcheck

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/flexiq/flexiq-scaled/internal/config"
)

// FuzzChecks: a file config.Load accepts survives every check against the
// machine and the warnings (config's FuzzParse fuzzes the loader itself).
func FuzzChecks(f *testing.F) {
	f.Add([]byte(pool("")))
	f.Add([]byte(pool("user = \"nobody\"\ngroup = \"0\"\nexec = [\"true\"]")))
	f.Add([]byte(commandProbe("user = \"root\"", "user = \"toor\"\n")))
	f.Add([]byte(withSource("type = \"postgres-query\"\nurl_file = \"/etc/flexiq/pg.url\"\nquery = \"select 1\"")))
	noNSS := func(string, string) (account, error) { return account{found: true}, nil }
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "fuzz.toml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := config.Load(path)
		if err != nil {
			return
		}
		checkUsers(c, noNSS)
		checkExecutables(c, systemdSearchPath, func(string) bool { return false })
		CheckPaths(c)
		CheckCredentials(c)
		Warnings(c)
	})
}
