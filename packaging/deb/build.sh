#!/usr/bin/env bash
# Builds dist/flexiq-scaled_<version>_<arch>.deb from the checkout with
# dpkg-deb and a staged tree: no debhelper, no debian/ source package. The
# maintainer scripts next to this file are what debhelper would generate.
#
#   packaging/deb/build.sh [--version V] [--out DIR]
#
# `make deb` runs it with the Makefile's Go toolchain and LDFLAGS (which stamp
# the version into the binary). Environment:
#   GO                 the go command (default: go)
#   LDFLAGS            -ldflags for the binary (default: the version stamp)
#   GOARCH             cross-build for another architecture (CGO is off)
#   DEB_MAINTAINER     the Maintainer field and the maintainer of a
#                      generated changelog entry
#   SOURCE_DATE_EPOCH  timestamp of the files (default: the changelog's)
# Prints the path of the .deb on stdout.
set -euo pipefail
umask 022

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
version=""
out="$root/dist"
while [ $# -gt 0 ]; do
	case "$1" in
	--version) version=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	*) echo "usage: $0 [--version V] [--out DIR]" >&2; exit 2 ;;
	esac
done
[ -n "$version" ] || version=$(cat "$root/VERSION")
# Debian version syntax, and no revision: this is a native package, built
# from its own tree (a version with a '-' would make lintian ask for a
# Debian revision and a changelog.Debian.gz).
if ! [[ "$version" =~ ^[0-9][A-Za-z0-9.+~]*$ ]]; then
	echo "build.sh: version $version: want a native Debian version such as 0.1.0" >&2
	exit 2
fi
GO=${GO:-go}
LDFLAGS=${LDFLAGS:--X github.com/flexiq/flexiq-scaled/internal/version.Version=$version}
maintainer=${DEB_MAINTAINER:-$(sed -n 's/^ -- \(.*>\)  .*/\1/p' "$here/changelog" | head -1)}

goarch=${GOARCH:-$("$GO" env GOARCH)}
case "$goarch" in
amd64 | arm64 | s390x | riscv64 | loong64) arch=$goarch ;;
386) arch=i386 ;;
arm) arch=armhf ;;
ppc64le) arch=ppc64el ;;
mips64le) arch=mips64el ;;
*) echo "build.sh: no Debian architecture known for GOARCH=$goarch" >&2; exit 2 ;;
esac

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
chmod 0755 "$stage"

# The changelog: the tree's, with an entry for this version on top when it
# is not the tree's own (e.g. the "N+1" of the upgrade test), so that the
# package's changelog always names its version.
changelog="$stage/changelog"
# (Parsed with sed rather than dpkg-parsechangelog, so that building needs
# nothing from dpkg-dev.)
entry_version() { sed -n '1s/^flexiq-scaled (\([^)]*\)).*/\1/p' "$1"; }
entry_time() { date -d "$(sed -n 's/^ -- .*>  //p' "$1" | head -1)" +%s; }
top=$(entry_version "$here/changelog")
if [ "$top" != "$version" ]; then
	# Dated now (or SOURCE_DATE_EPOCH), but never before the entry below it.
	when=${SOURCE_DATE_EPOCH:-$(date +%s)}
	top_when=$(entry_time "$here/changelog")
	[ "$when" -gt "$top_when" ] || when=$((top_when + 1))
	{
		printf 'flexiq-scaled (%s) unstable; urgency=medium\n\n' "$version"
		printf '  * Build of version %s from the tree of version %s.\n\n' "$version" "$top"
		printf ' -- %s  %s\n\n' "$maintainer" "$(date -R -u -d "@$when")"
	} >"$changelog"
fi
cat "$here/changelog" >>"$changelog"
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(entry_time "$changelog")}

# The binary: static (CGO_ENABLED=0), stripped (-s -w, as dh_strip would),
# stamped with the version. Not -trimpath: that would compile every package
# afresh instead of reusing what `make build` and the tests compiled (40 s
# more on a cold cache), for the sake of build paths that -s -w mostly
# removes anyway. No VCS stamping: it fails in a checkout owned by another
# user, and the version says what was built.
CGO_ENABLED=0 GOARCH=$goarch "$GO" -C "$root" build -buildvcs=false \
	-ldflags "$LDFLAGS -s -w" -o "$stage/usr/bin/flexiq-scaled" ./cmd/flexiq-scaled
# The helper that draws `flexiq-scaled history --svg/--png` with gonum/plot,
# kept out of the daemon's binary (its fonts cost the daemon 4 MB), where
# flexiq-scaled looks for it: ../libexec/flexiq-scaled/ from /usr/bin.
CGO_ENABLED=0 GOARCH=$goarch "$GO" -C "$root" build -buildvcs=false \
	-ldflags "-s -w" -o "$stage/usr/libexec/flexiq-scaled/flexiq-scaled-plot" ./cmd/flexiq-scaled-plot
# A package whose binary says another version would defeat the upgrade test.
if [ "$goarch" = "$("$GO" env GOHOSTARCH)" ]; then
	says=$("$stage/usr/bin/flexiq-scaled" version)
	case "$says" in
	"flexiq-scaled $version "*) ;;
	*) echo "build.sh: the binary says \"$says\", not version $version (LDFLAGS=$LDFLAGS)" >&2; exit 1 ;;
	esac
fi

install -D -m 0644 "$root/systemd/flexiq-scaled.service" "$stage/lib/systemd/system/flexiq-scaled.service"
install -D -m 0644 "$root/systemd/flexiq.slice" "$stage/lib/systemd/system/flexiq.slice"
# Shipped disabled (no enable in postinst): metrics on localhost are the
# administrator's choice (systemctl enable --now flexiq-scaled-metrics.socket).
install -D -m 0644 "$root/systemd/flexiq-scaled-metrics.socket" "$stage/lib/systemd/system/flexiq-scaled-metrics.socket"
install -D -m 0644 "$root/systemd/flexiq-scaled-metrics.service" "$stage/lib/systemd/system/flexiq-scaled-metrics.service"
install -D -m 0644 "$root/systemd/config.example.toml" "$stage/etc/flexiq-scaled/config.toml"
install -D -m 0644 "$here/sysusers.conf" "$stage/usr/lib/sysusers.d/flexiq-scaled.conf"
install -D -m 0644 "$root/packaging/completion/flexiq-scaled.bash" "$stage/usr/share/bash-completion/completions/flexiq-scaled"

man="$stage/usr/share/man"
install -d "$man/man5" "$man/man8"
gzip -9n <"$root/docs/man/flexiq-scaled.8" >"$man/man8/flexiq-scaled.8.gz"
gzip -9n <"$root/docs/man/flexiq-scaled.toml.5" >"$man/man5/flexiq-scaled.toml.5.gz"

doc="$stage/usr/share/doc/flexiq-scaled"
install -D -m 0644 "$here/copyright" "$doc/copyright"
# A native package has changelog.gz, not changelog.Debian.gz.
gzip -9n <"$changelog" >"$doc/changelog.gz"
rm "$changelog"
install -d "$doc/examples"
install -m 0644 "$root/systemd/config.example.toml" "$doc/examples/config.example.toml"
cp -r "$here/examples/." "$doc/examples/"
if [ -s "$here/lintian-overrides" ]; then
	install -D -m 0644 "$here/lintian-overrides" "$stage/usr/share/lintian/overrides/flexiq-scaled"
fi
find "$stage" -type d -exec chmod 0755 {} +
find "$stage" -type f ! -path "$stage/usr/bin/*" ! -path "$stage/usr/libexec/*" -exec chmod 0644 {} +
# The configuration may hold credentials (a pool's environment): root only,
# and the daemon runs as root. The postinst keeps it so on upgrades.
chmod 0640 "$stage/etc/flexiq-scaled/config.toml"

# DEBIAN/: control, conffiles, maintainer scripts, md5sums (of everything
# but the conffiles, as dh_md5sums does).
install -d "$stage/DEBIAN"
echo /etc/flexiq-scaled/config.toml >"$stage/DEBIAN/conffiles"
install -m 0755 "$here/preinst" "$here/postinst" "$here/prerm" "$here/postrm" "$stage/DEBIAN/"
(cd "$stage" && find . -type f ! -path './DEBIAN/*' ! -path './etc/*' -printf '%P\0' | LC_ALL=C sort -z | xargs -0 md5sum) >"$stage/DEBIAN/md5sums"
# Installed-Size as dpkg-gencontrol counts it: KiB per file, rounded up, and
# one per directory.
size=$(find "$stage" ! -path "$stage/DEBIAN*" \( -type f -printf '%s\n' -o -printf '1024\n' \) |
	awk '{ kib += int(($1 + 1023) / 1024) } END { print kib }')
sed -e "s|@VERSION@|$version|" -e "s|@ARCH@|$arch|" -e "s|@INSTALLED_SIZE@|$size|" \
	-e "s|@MAINTAINER@|$maintainer|" "$here/control" >"$stage/DEBIAN/control"
chmod 0644 "$stage/DEBIAN/control" "$stage/DEBIAN/conffiles" "$stage/DEBIAN/md5sums"

find "$stage" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
mkdir -p "$out"
deb="$out/flexiq-scaled_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >/dev/null
echo "$deb"
