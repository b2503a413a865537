package conn

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flexiq/flexiq-scaled/internal/config"
)

func TestURL(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
		return p
	}
	pw := write("pw", "s3cret\n", 0o600)
	urlFile := write("url", "postgres://app:filepw@db:5432/q\n", 0o600)
	open := write("open", "s3cret", 0o644)
	groupWritable := write("622", "s3cret", 0o622)
	queryURL := write("query.url", "postgres://app@db/q?password=s3cret\n", 0o600)
	link := filepath.Join(dir, "link")
	if err := os.Symlink(pw, link); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CREDENTIALS_DIRECTORY", dir)

	cases := []struct {
		name string
		conn config.Conn
		want string // the URL, or "error: <part of the message>"
	}{
		{"plain", config.Conn{URL: "redis://127.0.0.1:6379/0"}, "redis://127.0.0.1:6379/0"},
		{"password file", config.Conn{URL: "postgres://app@db/q", PasswordFile: pw}, "postgres://app:s3cret@db/q"},
		{"url file", config.Conn{URLFile: urlFile}, "postgres://app:filepw@db:5432/q"},
		{"url file and password file", config.Conn{URLFile: urlFile, PasswordFile: pw}, "postgres://app:s3cret@db:5432/q"},
		{"password credential", config.Conn{URL: "redis://:@r:6379", PasswordCredential: "pw"}, "redis://:s3cret@r:6379"},
		{"url credential", config.Conn{URLCredential: "url"}, "postgres://app:filepw@db:5432/q"},
		{"missing file", config.Conn{URL: "redis://r", PasswordFile: filepath.Join(dir, "nope")}, "error: does not exist"},
		{"missing credential", config.Conn{URL: "redis://r", PasswordCredential: "nope"}, "error: credential nope"},
		// The connect-time read applies the load-time rules: the file
		// may have changed since.
		{"symlinked password file", config.Conn{URL: "redis://r", PasswordFile: link}, "error: is a symbolic link"},
		{"group-writable password file", config.Conn{URL: "redis://r", PasswordFile: groupWritable}, "error: mode 0622"},
		{"password in the url file's query", config.Conn{URLFile: queryURL}, `error: carries the query parameter "password"`},
	}
	if os.Geteuid() == 0 {
		cases = append(cases, struct {
			name string
			conn config.Conn
			want string
		}{"world-readable password file", config.Conn{URL: "redis://r", PasswordFile: open}, "error: gives group or others access"})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u, err := URL(tc.conn)
			if want, isErr := strings.CutPrefix(tc.want, "error: "); isErr {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("err = %v, want one containing %q", err, want)
				}
				if strings.Contains(err.Error(), "s3cret") {
					t.Errorf("the error shows the secret: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if u.String() != tc.want {
				t.Errorf("URL %q, want %q", u.String(), tc.want)
			}
			if strings.Contains(Redacted(u), "s3cret") || strings.Contains(Redacted(u), "filepw") {
				t.Errorf("redacted %q shows the password", Redacted(u))
			}
		})
	}
	t.Run("no credentials directory", func(t *testing.T) {
		t.Setenv("CREDENTIALS_DIRECTORY", "")
		if _, err := URL(config.Conn{URL: "redis://r", PasswordCredential: "pw"}); err == nil || !strings.Contains(err.Error(), "LoadCredential=") {
			t.Errorf("err = %v, want advice on LoadCredential=", err)
		}
	})
}

// Every message shows a server's URL through Redacted: no password, and no
// query value, whatever the parameter.
func TestRedactedHidesQuery(t *testing.T) {
	u, err := URL(config.Conn{URL: "postgres://app@db/q?sslrootcert=/etc/s3cret.pem&application_name=s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	if got := Redacted(u); strings.Contains(got, "s3cret") || got != "postgres://app@db/q?application_name=xxxxx&sslrootcert=xxxxx" && got != "postgres://app@db/q?sslrootcert=xxxxx&application_name=xxxxx" {
		t.Errorf("redacted = %q", got)
	}
}
