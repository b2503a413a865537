package stores

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/fleet/pgstore"
	"github.com/flexiq/flexiq-scaled/internal/fleet/redisstore"
)

// Each scheme the configuration accepts opens its store, whether the URL
// was written out (config set Store at load) or comes from a file read
// only now; anything else is refused without showing the URL.
func TestOpen(t *testing.T) {
	dir := t.TempDir()
	n := 0
	file := func(content string) string {
		n++
		p := filepath.Join(dir, fmt.Sprint("url", n))
		if err := os.WriteFile(p, []byte(content+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name string
		f    config.Fleet
		want string // the store's kind, or "error: <part of the message>"
	}{
		{"redis, kind from the load", config.Fleet{Conn: config.Conn{URL: "redis://h/0"}, Store: config.FleetStoreRedis}, config.FleetStoreRedis},
		{"postgres, kind from the load", config.Fleet{Conn: config.Conn{URL: "postgres://h/q"}, Store: config.FleetStorePostgres}, config.FleetStorePostgres},
		{"unknown kind", config.Fleet{Conn: config.Conn{URL: "redis://h/0"}, Store: "etcd"}, `error: unknown kind "etcd"`},
		{"http in a file", config.Fleet{Conn: config.Conn{URLFile: file("http://u:s3cret@h")}}, "error: is neither redis:// nor postgres://"},
		{"missing file", config.Fleet{Conn: config.Conn{URLFile: filepath.Join(dir, "nope")}}, "error: the fleet's store: "},
	}
	for _, scheme := range []string{"redis", "rediss", "postgres", "postgresql"} {
		want, err := config.FleetStore(scheme + "://h/x")
		if err != nil {
			t.Fatal(err)
		}
		tests = append(tests, struct {
			name string
			f    config.Fleet
			want string
		}{scheme + " in a file", config.Fleet{Conn: config.Conn{URLFile: file(scheme + "://h/x")}}, want})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(tc.f)
			if want, isErr := strings.CutPrefix(tc.want, "error: "); isErr {
				if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "s3cret") {
					t.Fatalf("err = %v, want one containing %q, without the password", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got := Kind(s); got != tc.want {
				t.Errorf("Kind = %q, want %q", got, tc.want)
			}
			switch s.(type) {
			case *redisstore.Store, *pgstore.Store:
			default:
				t.Errorf("Open gave a %T", s)
			}
		})
	}
}
