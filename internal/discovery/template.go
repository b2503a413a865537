package discovery

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"text/template"

	"github.com/flexiq/flexiq-scaled/internal/safefile"
)

// TemplateSpec is one user template as config gives it: the template file,
// the file it renders to, that file's mode (0 means 0644, readable by a
// proxy running as its own user), and an optional command to run after
// the rendered file changes (for example systemctl reload nginx).
type TemplateSpec struct {
	Source      string
	Destination string
	Mode        os.FileMode
	After       *Command
}

// Validate checks the spec's paths and command; key is the config key of
// the template (e.g. "pool.web.template[0]") for the error.
func (s TemplateSpec) Validate(key string) error {
	if !filepath.IsAbs(s.Source) {
		return fmt.Errorf("%s.source: %q is not an absolute path", key, s.Source)
	}
	if !filepath.IsAbs(s.Destination) {
		return fmt.Errorf("%s.destination: %q is not an absolute path", key, s.Destination)
	}
	if s.Mode&^os.ModePerm != 0 {
		return fmt.Errorf("%s.mode: %v has bits beyond the permissions", key, s.Mode)
	}
	if s.After != nil {
		return s.After.Validate(key + ".after_change")
	}
	return nil
}

// Template is a parsed user template. It is executed with the pool's Set:
// .Pool, .Replicas and .Leaders (one per gang group), each replica with
// .Slot .Unit .Address .Ports .Rank and the methods .HostPort "NAME" and
// .Port "NAME" (an undeclared port name fails the rendering). Funcs adds:
//
//	join SEP LIST        strings.Join(LIST, SEP)
//	hostports NAME REPS  the replicas' ADDR:PORT of port NAME, as a list
//
// so an env file can say BACKENDS={{.Leaders | hostports "http" | join ","}}.
type Template struct {
	Spec TemplateSpec
	tmpl *template.Template
	text string
	// abandoned is set once an execution outlived RenderTimeout: it may
	// still be running, and running the template again would only add
	// another (render.go, execute).
	abandoned atomic.Bool
}

// Text is the template's source as it was read at load: a reload compares
// it (config.Diff), since an edited template file changes what is rendered
// although the config file names the same path.
func (t *Template) Text() string { return t.text }

// Funcs are the helper functions every template may call.
var Funcs = template.FuncMap{
	"join":      func(sep string, elems []string) string { return strings.Join(elems, sep) },
	"hostports": hostports,
}

func hostports(port string, rs []Replica) ([]string, error) {
	out := make([]string, len(rs))
	for i, r := range rs {
		hp, err := r.HostPort(port)
		if err != nil {
			return nil, err
		}
		out[i] = hp
	}
	return out, nil
}

// TemplateError is a template that does not parse or execute, shaped for a
// config error: the file, the line (0 when text/template gave none) and
// text/template's message without its "template: NAME:LINE:" prefix.
type TemplateError struct {
	File string
	Line int
	Msg  string
}

func (e *TemplateError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	}
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
}

// templateError reshapes text/template's error, whose text is
// "template: NAME:LINE: MSG" when parsing and "template: NAME:LINE:COL:
// MSG" when executing; NAME is the file, which may itself hold colons, so
// it is cut off as a known prefix rather than split on.
func templateError(file string, err error) *TemplateError {
	msg := err.Error()
	rest, ok := strings.CutPrefix(msg, "template: "+file+":")
	if !ok {
		return &TemplateError{File: file, Msg: strings.TrimPrefix(msg, "template: ")}
	}
	lineText, after, ok := strings.Cut(rest, ":")
	line, err2 := strconv.Atoi(lineText)
	if !ok || err2 != nil {
		return &TemplateError{File: file, Msg: strings.TrimSpace(rest)}
	}
	// Skip the column of an execution error.
	if colText, tail, ok := strings.Cut(after, ":"); ok {
		if _, err := strconv.Atoi(colText); err == nil {
			after = tail
		}
	}
	return &TemplateError{File: file, Line: line, Msg: strings.TrimSpace(after)}
}

// ParseTemplate parses text as the template file name; an error is a
// *TemplateError naming name and the line. A range over a number is
// refused here (checkTree): it is the one loop whose length the template
// alone decides, and so the one that can run for any time without the
// replicas to show for it.
func ParseTemplate(name, text string) (*template.Template, error) {
	t, err := template.New(name).Funcs(Funcs).Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, templateError(name, err)
	}
	if err := checkTree(t); err != nil {
		return nil, err
	}
	return t, nil
}

// MaxSource bounds a template file: a proxy's configuration template is a
// few KiB, and a file that is not one must not cost the daemon memory.
const MaxSource = 1 << 20

// LoadTemplate validates spec (key names it in errors), reads and parses
// its source. The source is read as config.toml is judged (internal/
// safefile): the file itself, not a link, a regular file (a FIFO does not
// block the load), at most MaxSource bytes, and when the daemon runs as
// root, writable by root only, since the daemon writes what it renders,
// as root, to the destination. A parse error is a *TemplateError naming
// the file and line; config load and reload report it and keep the old
// config.
func LoadTemplate(key string, spec TemplateSpec) (*Template, error) {
	if err := spec.Validate(key); err != nil {
		return nil, err
	}
	text, fi, err := safefile.Read(spec.Source, MaxSource)
	if err != nil {
		return nil, fmt.Errorf("%s.source: %w", key, err)
	}
	if faults := safefile.WriteFaults(fi, os.Geteuid()); len(faults) > 0 {
		return nil, fmt.Errorf("%s.source: refusing template %s: it %s, and the daemon renders it as root into %s; "+
			"make it root-owned and not group- or world-writable (chown root: %s; chmod go-w %s)",
			key, spec.Source, strings.Join(faults, " and "), spec.Destination, spec.Source, spec.Source)
	}
	t, err := ParseTemplate(spec.Source, string(text))
	if err != nil {
		return nil, err
	}
	if spec.Mode == 0 {
		spec.Mode = 0o644
	}
	return &Template{Spec: spec, tmpl: t, text: string(text)}, nil
}

// Check executes the template on sample, under the same bounds as Render
// (MaxOutput, RenderTimeout), discarding the output, to catch at load what
// parsing cannot: a field that does not exist, a port the pool does not
// declare, a template that renders too much or too long. Config builds
// sample from the pool's declared ports (one replica is enough). The error
// is a *TemplateError.
func (t *Template) Check(sample Set) error {
	_, err := t.execute(sample)
	return err
}

// Render executes the template on s, within MaxOutput bytes and
// RenderTimeout; an error is a *TemplateError.
func (t *Template) Render(s Set) ([]byte, error) {
	return t.execute(s)
}
