package config

import (
	"net/url"
	"strings"
	"testing"
)

// A credential in the URL's query is refused at load, naming the file and
// the key, and the message never shows its value.
func TestConnURLCredentialRefused(t *testing.T) {
	src := func(typ, u, extra string) string {
		return "[pools.q]\nexec = [\"/bin/true\"]\n[pools.q.source]\ntype = \"" + typ + "\"\nurl = \"" + u + "\"\n" + extra
	}
	const pg, prom = "river", "prometheus"
	const promQ = "pending_query = \"up\"\n"
	tests := []struct {
		name, text, msg string // msg "" means accepted
	}{
		{"postgres password param", src(pg, "postgres://app@db.example/q?password=hunter2", ""), `query parameter "password"`},
		{"postgres sslpassword param", src(pg, "postgres://app@db.example/q?sslmode=verify-full&sslpassword=hunter2", ""), `query parameter "sslpassword"`},
		{"param name case and dash", src(pg, "postgres://app@db.example/q?PassWord=hunter2", ""), `query parameter "PassWord"`},
		{"escaped param name", src(pg, "postgres://app@db.example/q?pass%77ord=hunter2", ""), `query parameter "password"`},
		{"prometheus api_key", src(prom, "https://prom.example/?api_key=hunter2", promQ), `query parameter "api_key"`},
		{"prometheus access_token", src(prom, "https://prom.example/?access_token=hunter2", promQ), `query parameter "access_token"`},
		{"prometheus x-api-key", src(prom, "https://prom.example/?X-API-Key=hunter2", promQ), `query parameter "X-API-Key"`},
		{"prometheus token", src(prom, "https://prom.example/?token=hunter2", promQ), `query parameter "token"`},
		{"prometheus client_secret", src(prom, "https://prom.example/?client_secret=hunter2", promQ), `query parameter "client_secret"`},
		{"redis password param", src("rq", "redis://r.example/0?password=hunter2", "queues = [\"q\"]\n"), `query parameter "password"`},
		{"password in user info", src(pg, "postgres://app:hunter2@db.example/q", ""), "carries a password"},
		{"URL that does not parse, password in it", src(pg, "postgres://app:hun%zzter2@db.example/q", ""), "not a URL"},
		{"harmless params", src(pg, "postgres://app@db.example/q?sslmode=verify-full&sslrootcert=/etc/ssl/db.pem&application_name=x", ""), ""},
		{"require_auth is a setting, not a secret", src(pg, "postgres://app@db.example/q?require_auth=scram-sha-256", ""), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, tc.text)
			if tc.msg == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted; want a problem with %q", tc.msg)
			}
			ps := problems(t, err)
			if len(ps) != 1 || ps[0].Key != "pools.q.source.url" || !strings.Contains(ps[0].Msg, tc.msg) || !strings.HasSuffix(ps[0].File, "config.toml") {
				t.Fatalf("problems %q: want one for pools.q.source.url containing %q", ps, tc.msg)
			}
			if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "hun%zz") {
				t.Errorf("the message shows the secret: %v", err)
			}
		})
	}
}

func TestRedactURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"postgres://app:hunter2@db:5432/q?password=hunter2", "postgres://app:xxxxx@db:5432/q?password=xxxxx"},
		{"https://prom.example/p?api_key=hunter2&x=1;y=2", "https://prom.example/p?api_key=xxxxx&x=xxxxx&y=xxxxx"},
		{"redis://r:6379/0?hunter2", "redis://r:6379/0?xxxxx"},
		{"redis://r:6379/0#hunter2", "redis://r:6379/0"},
		{"postgres://app@db/q", "postgres://app@db/q"},
		{"postgres://app@db/q?sslmode=disable", "postgres://app@db/q?sslmode=xxxxx"},
	}
	for _, tc := range tests {
		u, err := url.Parse(tc.in)
		if err != nil {
			t.Fatal(err)
		}
		if got := RedactURL(u); got != tc.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if got := RedactURLString(tc.in); got != tc.want {
			t.Errorf("RedactURLString(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := RedactURLString("postgres://app:hun%zzter2@db/q"); strings.Contains(got, "hun") {
		t.Errorf("a URL that does not parse is shown: %q", got)
	}
}

// A server reached over a network gets sslmode=verify-full unless the URL
// names a mode; loopback and Unix sockets are left as they are.
func TestPostgresDefaultTLS(t *testing.T) {
	tests := []struct{ in, wantMode string }{
		{"postgres://app@db.example/q", "verify-full"},
		{"postgres://app@10.0.0.5:5432/q", "verify-full"},
		{"postgres://app@[2001:db8::1]:5432/q", "verify-full"},
		{"postgres://app@127.0.0.1,db.example/q", "verify-full"},
		{"postgres://app@localhost/q?host=db.example", "verify-full"},
		{"postgres://app@db.example/q?sslmode=disable", "disable"},
		{"postgres://app@db.example/q?ssl=true", ""},
		{"postgres://app@127.0.0.1:5432/q", ""},
		{"postgres://app@127.8.9.10/q", ""},
		{"postgres://app@[::1]:5432/q", ""},
		{"postgres://app@localhost/q", ""},
		{"postgres://app@/q", ""},
		{"postgres://app@/q?host=/run/postgresql", ""},
	}
	for _, tc := range tests {
		u, err := url.Parse(tc.in)
		if err != nil {
			t.Fatal(err)
		}
		if got := PostgresDefaultTLS(u).Query().Get("sslmode"); got != tc.wantMode {
			t.Errorf("PostgresDefaultTLS(%q): sslmode %q, want %q", tc.in, got, tc.wantMode)
		}
	}
}
