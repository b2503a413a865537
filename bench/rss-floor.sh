#!/usr/bin/env bash
# The RSS floor of the daemon's binary: every one of its packages
# initialised, and nothing else done. A Go program runs the initialisers of
# all its packages before main, and the pages they touch stay resident, so
# this is what any flexiq-scaled process costs before its first tick
# (docs/performance.md, P3).
#
# It builds cmd/flexiq-scaled as the package does (static, -s -w) plus one
# file, added with `go build -overlay`, whose init sleeps: package main's
# initialisers run after every package it imports. The binary runs on this
# host, 3 times; the script prints each RSS and its parts. Needs no root and
# installs nothing; the binary is bin/_rss-floor/flexiq-scaled.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
go=$(scripts/ensure-go.sh)
# "_": go build ./... and go vet ./... skip the directory and its overlay file.
work=$root/bin/_rss-floor
mkdir -p "$work"
cat >"$work/zz_rss_floor.go" <<'GO'
package main

import (
	"fmt"
	"os"
	"time"
)

// Every package is initialised by now: say so, and do nothing else.
func init() {
	fmt.Println(os.Getpid())
	time.Sleep(time.Hour)
}
GO
printf '{"Replace": {"%s": "%s"}}\n' "$root/cmd/flexiq-scaled/zz_rss_floor.go" "$work/zz_rss_floor.go" >"$work/overlay.json"
CGO_ENABLED=0 "$go" build -buildvcs=false -ldflags "-s -w" -overlay "$work/overlay.json" -o "$work/flexiq-scaled" ./cmd/flexiq-scaled

field() { awk -v k="$1:" '$1 == k { printf "%.1f", $2 / 1024 }' "/proc/$2/status"; }
for i in 1 2 3; do
	"$work/flexiq-scaled" >"$work/pid" &
	proc=$!
	for _ in $(seq 50); do [ -s "$work/pid" ] && break; sleep 0.1; done
	sleep 1
	echo "run $i: RSS $(field VmRSS $proc) MB (anon $(field RssAnon $proc), file $(field RssFile $proc))"
	kill "$proc"
	wait "$proc" 2>/dev/null || true
	: >"$work/pid"
done
