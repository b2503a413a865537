package discovery

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const nginxTemplate = `upstream {{.Pool}} {
{{- range .Leaders}}
    server {{.HostPort "http"}};  # slot {{.Slot}}
{{- else}}
    server 127.0.0.1:1 down;  # no ready replica
{{- end}}
}
`

const envTemplate = `BACKENDS={{.Leaders | hostports "http" | join ","}}
`

func writeTemplate(t testing.TB, dir, name, text string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestTemplateRender(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		text string
		set  Set
		want string
	}{
		{"nginx", nginxTemplate, twoReplicas(), `upstream web {
    server 127.0.0.1:8001;  # slot 1
    server 127.0.0.1:8002;  # slot 2
}
`},
		{"nginx empty", nginxTemplate, NewSet("web", nil), `upstream web {
    server 127.0.0.1:1 down;  # no ready replica
}
`},
		{"env", envTemplate, twoReplicas(), "BACKENDS=127.0.0.1:8001,127.0.0.1:8002\n"},
		{"env empty", envTemplate, NewSet("web", nil), "BACKENDS=\n"},
		{"haproxy", `backend {{.Pool}}
{{- range .Replicas}}
    server s{{.Slot}} {{.Address}}:{{.Port "http"}} check
{{- end}}
`, twoReplicas(), `backend web
    server s1 127.0.0.1:8001 check
    server s2 127.0.0.1:8002 check
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := writeTemplate(t, dir, tt.name+".tmpl", tt.text)
			tmpl, err := LoadTemplate("pool.web.template[0]", TemplateSpec{Source: src, Destination: "/etc/nginx/x.conf"})
			if err != nil {
				t.Fatal(err)
			}
			got, err := tmpl.Render(tt.set)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
			if tmpl.Spec.Mode != 0o644 {
				t.Errorf("mode %v, want the default 0644", tmpl.Spec.Mode)
			}
		})
	}
}

func TestTemplateErrorsNameFileAndLine(t *testing.T) {
	dir := t.TempDir()
	sample := NewSet("web", []Replica{{Slot: 1, Unit: "u", Address: "127.0.0.1", Ports: map[string]int{"http": 1}}})
	tests := []struct {
		name    string
		text    string
		atCheck bool // the error comes from Check, not from parsing
		line    int
		msg     string
	}{
		// text/template counts the line where it noticed: after the last newline.
		{"unclosed action", "a\nb\n{{.Pool\n", false, 4, "unclosed action"},
		{"unknown function", "upstream x {\n  {{range .Replicas}}{{nosuch .}}{{end}}\n}\n", false, 2, `function "nosuch" not defined`},
		{"missing end", "x\n{{range .Replicas}}\n", false, 3, "unexpected EOF"},
		{"bad pipeline", "x\ny\n{{if}}z{{end}}\n", false, 3, "missing value for if"},
		{"unknown field", "ok\nok\n{{.Nope}}\n", true, 3, "can't evaluate field Nope"},
		{"undeclared port", "{{range .Replicas}}\n{{.HostPort \"grpc\"}}\n{{end}}", true, 2, `has no port "grpc"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A colon in the file name must not confuse the line.
			src := writeTemplate(t, dir, "a:"+strings.ReplaceAll(tt.name, " ", "_")+".tmpl", tt.text)
			tmpl, err := LoadTemplate("k", TemplateSpec{Source: src, Destination: "/x"})
			if !tt.atCheck {
				if err == nil {
					t.Fatal("parsed")
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				err = tmpl.Check(sample)
			}
			var te *TemplateError
			if !errors.As(err, &te) {
				t.Fatalf("error %v (%T) is not a *TemplateError", err, err)
			}
			if te.File != src || te.Line != tt.line || !strings.Contains(te.Msg, tt.msg) {
				t.Errorf("got file %q line %d msg %q, want %q line %d msg containing %q", te.File, te.Line, te.Msg, src, tt.line, tt.msg)
			}
			if !strings.HasPrefix(err.Error(), src+":") {
				t.Errorf("message %q does not start with the file", err)
			}
		})
	}
}

func TestTemplateSpecValidate(t *testing.T) {
	good := &Command{Path: "/usr/bin/systemctl", Args: []string{"reload", "nginx"}, Timeout: time.Second}
	tests := []struct {
		name string
		spec TemplateSpec
		want string // "" for no error
	}{
		{"good", TemplateSpec{Source: "/a.tmpl", Destination: "/b.conf", After: good}, ""},
		{"relative source", TemplateSpec{Source: "a.tmpl", Destination: "/b"}, "k.source"},
		{"relative destination", TemplateSpec{Source: "/a", Destination: "b"}, "k.destination"},
		{"bad mode", TemplateSpec{Source: "/a", Destination: "/b", Mode: os.ModeSetuid | 0o644}, "k.mode"},
		{"relative command", TemplateSpec{Source: "/a", Destination: "/b", After: &Command{Path: "systemctl", Timeout: time.Second}}, "k.after_change"},
	}
	for _, tt := range tests {
		err := tt.spec.Validate("k")
		if (err == nil) != (tt.want == "") || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%s: error %v, want one naming %q", tt.name, err, tt.want)
		}
	}
	if _, err := LoadTemplate("k", TemplateSpec{Source: "/nonexistent/x.tmpl", Destination: "/b"}); err == nil || !strings.Contains(err.Error(), "k.source") {
		t.Errorf("missing source: error %v, want one naming k.source", err)
	}
}

func TestCommand(t *testing.T) {
	tests := []struct {
		name    string
		argv    []string
		timeout time.Duration
		want    string // error fragment, "" for none
		wantTO  time.Duration
	}{
		{"absolute", []string{"/usr/bin/systemctl", "reload", "nginx"}, 5 * time.Second, "", 5 * time.Second},
		{"default timeout", []string{"/usr/sbin/nginx", "-s", "reload"}, 0, "", DefaultCommandTimeout},
		{"relative", []string{"systemctl", "reload", "nginx"}, 0, `pool.web.template[1].after_change: "systemctl" is not an absolute path`, 0},
		{"dot relative", []string{"./reload.sh"}, 0, "not an absolute path", 0},
		{"empty", nil, 0, "empty command", 0},
		{"empty path", []string{""}, 0, "empty command", 0},
		{"negative timeout", []string{"/bin/true"}, -time.Second, "not positive", 0},
	}
	for _, tt := range tests {
		c, err := NewCommand("pool.web.template[1].after_change", tt.argv, tt.timeout)
		if tt.want != "" {
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%s: error %v, want %q", tt.name, err, tt.want)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if strings.Join(c.Argv(), " ") != strings.Join(tt.argv, " ") || c.Timeout != tt.wantTO {
			t.Errorf("%s: argv %q timeout %v, want %q %v", tt.name, c.Argv(), c.Timeout, tt.argv, tt.wantTO)
		}
	}
}
