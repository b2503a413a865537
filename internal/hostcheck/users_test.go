package hostcheck

import (
	"os"
	"strings"
	"testing"

	"github.com/flexiq/flexiq-scaled/internal/config"
)

func TestCheckUsers(t *testing.T) {
	c, err := load(t, pool(`user = "root"`))
	if err != nil {
		t.Fatal(err)
	}
	if ps := CheckUsers(c); len(ps) != 0 {
		t.Errorf("root:root: %v", ps)
	}
	c.Pools["email"].User = "no_such_user_flexiq"
	c.Pools["email"].Group = "no_such_group_flexiq"
	ps := CheckUsers(c)
	if len(ps) != 2 || ps[0].Key != "pools.email.user" || ps[1].Key != "pools.email.group" ||
		!strings.Contains(ps[0].Msg, `"no_such_user_flexiq" does not exist`) {
		t.Errorf("missing user and group: %v", ps)
	}
}

// Under a user manager, only a user written in the file survives; the
// default would make every worker start fail.
func TestForUserManager(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/config.toml"
	src := `
[pools.dflt]
exec = ["/bin/true"]
[pools.dflt.source]
path = "/var/lib/flexiq/a.db"
[pools.named]
exec = ["/bin/true"]
user = "alice"
[pools.named.source]
path = "/var/lib/flexiq/a.db"
`
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	c.ForUserManager()
	if p := c.Pools["dflt"]; p.User != "" || p.Group != "" {
		t.Errorf("default user kept under a user manager: %q/%q", p.User, p.Group)
	}
	if p := c.Pools["named"]; p.User != "alice" {
		t.Errorf("explicit user dropped: %q", p.User)
	}
	probs := CheckUsers(c)
	if len(probs) == 0 {
		t.Error("CheckUsers found nothing; alice does not exist")
	}
	for _, p := range probs {
		if !strings.HasPrefix(p.Key, "pools.named.") {
			t.Errorf("CheckUsers reports %s; the default pool has no user to check", p.Key)
		}
	}
}
