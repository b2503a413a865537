package main

import (
	"os/exec"
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
	complete := func(words ...string) []string {
		t.Helper()
		script := `source ../../packaging/completion/flexiq-scaled.bash
COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _flexiq_scaled; printf '%s\n' "${COMPREPLY[@]}"`
		out, err := exec.Command(bash, append([]string{"--norc", "-c", script, "bash"}, words...)...).CombinedOutput()
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
}
