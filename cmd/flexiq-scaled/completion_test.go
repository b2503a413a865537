package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestBashCompletion runs the shipped completion in bash: every subcommand
// of main completes, and no command it offers is unknown to main.
func TestBashCompletion(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	// A stand-in for the installed command: the daemon's pools.
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "flexiq-scaled"), []byte("#!/bin/sh\n[ \"$1 $2\" = \"status --names\" ] && printf 'email\\nvideo\\n'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	complete := func(words ...string) []string {
		t.Helper()
		script := `source ../../packaging/completion/flexiq-scaled.bash
COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _flexiq_scaled; printf '%s\n' "${COMPREPLY[@]}"`
		cmd := exec.Command(bash, append([]string{"--norc", "-c", script, "bash"}, words...)...)
		cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("completing %q: %v\n%s", words, err, out)
		}
		return strings.Fields(string(out))
	}
	got := complete("flexiq-scaled", "")
	var want []string
	for _, c := range commands {
		want = append(want, c.name)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("subcommands completed: %q, main has %q", got, want)
	}
	if got := complete("flexiq-scaled", "pa"); !slices.Equal(got, []string{"pause"}) {
		t.Errorf("'pa' completes to %q, want pause", got)
	}
	if got := complete("flexiq-scaled", "help", "unp"); !slices.Equal(got, []string{"unpin"}) {
		t.Errorf("'help unp' completes to %q, want unpin", got)
	}
	if got := complete("flexiq-scaled", "pause", ""); !slices.Equal(got, []string{"email", "video"}) {
		t.Errorf("'pause ' completes to %q, want the pools", got)
	}
	if got := complete("flexiq-scaled", "pin", "--for", "10m", "v"); !slices.Equal(got, []string{"video"}) {
		t.Errorf("'pin --for 10m v' completes to %q, want video", got)
	}
	if got := complete("flexiq-scaled", "pin", "email", ""); len(got) != 0 {
		t.Errorf("'pin email ' (the count) completes to %q, want nothing", got)
	}
	if got := complete("flexiq-scaled", "pool", ""); !slices.Equal(got, []string{"add", "rm"}) {
		t.Errorf("'pool ' completes to %q, want add and rm", got)
	}
	if got := complete("flexiq-scaled", "pool", "rm", "e"); !slices.Equal(got, []string{"email"}) {
		t.Errorf("'pool rm e' completes to %q, want email", got)
	}
	if got := complete("flexiq-scaled", "pool", "add", ""); len(got) != 0 {
		t.Errorf("'pool add ' (a new name) completes to %q, want nothing", got)
	}
	if got := complete("flexiq-scaled", "history", "--since", "1h", "v"); !slices.Equal(got, []string{"video"}) {
		t.Errorf("'history --since 1h v' completes to %q, want video", got)
	}
}
