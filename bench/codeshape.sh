#!/bin/sh
# bench/codeshape.sh [REV]: the shape of the code at REV (default: the work
# tree): lines per package, longest files and functions, import levels and
# hubs (bench/codeshape), and the duplicates pairs outside tests. Issue 18's
# closing note compares two commits with it.
set -eu
cd "$(dirname "$0")/.."
GO=$(scripts/ensure-go.sh)
tool=$(mktemp -d)
trap 'rm -rf "$tool"' EXIT
"$GO" build -o "$tool/codeshape" ./bench/codeshape
dir=.
if [ $# -gt 0 ]; then
	dir="$tool/tree"
	git worktree add -q --detach "$dir" "$1"
	trap 'git worktree remove --force "$dir"; rm -rf "$tool"' EXIT
fi
(cd "$dir" && PATH="$(dirname "$GO"):$PATH" "$tool/codeshape")
if command -v duplicates >/dev/null; then
	echo
	echo "## duplicates pairs outside tests (neither side a _test.go or testdata)"
	duplicates --repo "$dir" --most 200 --seconds 120 |
		grep -E '^D[0-9]+ ' | grep -Ev '_test\.go:[0-9-]+ ~ [^ ]*_test\.go|testdata/' |
		grep -Ev '_test\.go' | tee "$tool/dups" | head -20
	echo "pairs: $(wc -l < "$tool/dups")"
fi
