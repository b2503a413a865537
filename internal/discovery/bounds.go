package discovery

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"text/template"
	"text/template/parse"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/safefile"
)

// The bounds on a template's execution (issue 27, item 6): a template runs
// on the pool's loop, in a daemon with a MemoryMax, and text/template has
// no context to cancel it with. Before, {{range 30000000}}0123456789{{end}}
// passed the load's check and rendered 286 MB.

// MaxOutput bounds what a template renders, and what is read back from a
// destination before the first write to it: an nginx upstream block for
// 1,000 replicas is under 100 KiB.
const MaxOutput = 4 << 20

// RenderTimeout bounds one execution of a template. Rendering a discovery
// file takes well under a millisecond; the bound is for a mistake, and it
// is what the pool's loop may be held by one.
const RenderTimeout = 2 * time.Second

// Errors the capped writer returns, which text/template hands back from
// Execute as they are: a write error stops the execution at once.
var (
	errOverCap = fmt.Errorf("renders over %s: a discovery file that large is a mistake (is a range looping over more than the replicas?)",
		safefile.Size(MaxOutput))
	errTooSlow = fmt.Errorf("took over %v to render, and was stopped", RenderTimeout)
)

// cappedWriter is the template's output, refusing a write that would take
// it past limit bytes or that comes after deadline.
type cappedWriter struct {
	buf      bytes.Buffer
	limit    int
	deadline time.Time
}

func (w *cappedWriter) Write(p []byte) (int, error) {
	if w.buf.Len()+len(p) > w.limit {
		return 0, errOverCap
	}
	if time.Now().After(w.deadline) {
		return 0, errTooSlow
	}
	return w.buf.Write(p)
}

// execute runs the template on s within the bounds. The writer stops a
// template that writes too much or writes late; one that loops without
// writing cannot be stopped (a goroutine cannot be killed), so it runs on
// its own goroutine, and at RenderTimeout the caller is released and the
// execution abandoned: it spins on, using one CPU, until it ends or the
// daemon restarts. The template is then marked and never run again, so
// there is one such execution per broken template, not one per publish.
// The parse-time check (checkTree) keeps out the plain case, a range over
// a number.
func (t *Template) execute(s Set) ([]byte, error) {
	if t.abandoned.Load() {
		return nil, &TemplateError{File: t.Spec.Source, Msg: fmt.Sprintf(
			"an earlier rendering did not finish within %v and was abandoned; the template is not run again: fix it and reload", RenderTimeout)}
	}
	w := &cappedWriter{limit: MaxOutput, deadline: time.Now().Add(RenderTimeout)}
	// A copy: an abandoned execution must not read maps its caller
	// goes on to change.
	s = Set{Pool: s.Pool, Replicas: cloneReplicas(s.Replicas), Wake: s.Wake}
	done := make(chan error, 1)
	go func() { done <- t.tmpl.Execute(w, s) }()
	timer := time.NewTimer(RenderTimeout)
	defer timer.Stop()
	select {
	case err := <-done:
		if err != nil {
			return nil, templateError(t.Spec.Source, err)
		}
		return w.buf.Bytes(), nil
	case <-timer.C:
		t.abandoned.Store(true)
		return nil, &TemplateError{File: t.Spec.Source, Msg: fmt.Sprintf(
			"did not finish rendering within %v, writing nothing (a loop that never ends?); abandoned, it is not run again until a reload",
			RenderTimeout)}
	}
}

// checkTree refuses a range over a number literal in any of t's
// templates ({{range 30000000}}): nothing a discovery file needs loops
// over anything but the replicas, and a loop of a given length can
// outrun every bound when its body writes nothing.
func checkTree(t *template.Template) error {
	for _, tt := range t.Templates() {
		if tt.Tree == nil || tt.Tree.Root == nil {
			continue
		}
		if n := findRangeOverNumber(tt.Tree.Root); n != nil {
			return &TemplateError{File: t.Name(), Line: lineOf(tt.Tree, n),
				Msg: fmt.Sprintf("range over the number %s: a discovery template ranges over .Replicas, .Leaders or .Ports", n.Text)}
		}
	}
	return nil
}

func findRangeOverNumber(n parse.Node) *parse.NumberNode {
	var lists []*parse.ListNode
	switch n := n.(type) {
	case *parse.ListNode:
		lists = []*parse.ListNode{n}
	case *parse.RangeNode:
		if p := n.Pipe; p != nil && len(p.Cmds) == 1 && len(p.Cmds[0].Args) == 1 {
			if num, ok := p.Cmds[0].Args[0].(*parse.NumberNode); ok {
				return num
			}
		}
		lists = []*parse.ListNode{n.List, n.ElseList}
	case *parse.IfNode:
		lists = []*parse.ListNode{n.List, n.ElseList}
	case *parse.WithNode:
		lists = []*parse.ListNode{n.List, n.ElseList}
	}
	for _, l := range lists {
		if l == nil {
			continue
		}
		for _, c := range l.Nodes {
			if num := findRangeOverNumber(c); num != nil {
				return num
			}
		}
	}
	return nil
}

// lineOf is n's line in its template file, from the tree's
// "NAME:LINE:COL" context; NAME, a path, may hold colons of its own.
func lineOf(tree *parse.Tree, n parse.Node) int {
	loc, _ := tree.ErrorContext(n)
	lineText, _, _ := strings.Cut(strings.TrimPrefix(loc, tree.ParseName+":"), ":")
	line, _ := strconv.Atoi(lineText)
	return line
}
