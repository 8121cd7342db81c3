#!/usr/bin/env bash
# Builds pacer's Debian package, dist/pacer_VERSION_amd64.deb, with nfpm (a Go
# tool pinned in go.mod: `go tool nfpm`, nothing downloaded but Go modules).
# Install it with `apt-get install ./dist/pacer_*.deb`. What goes in it:
# deploy/nfpm.yaml.
#
# Environment (all optional):
#   PACER_BIN          a pacer binary already built (cgo, linux/amd64) to package
#                      instead of building one with `go build`
#   PACER_DIST         the output directory (default dist)
#   PACER_DEB_VERSION  the Debian version (default: from `git describe --tags
#                      --always`: tag v1.2.3 -> 1.2.3, 4 commits later -> 1.2.3+4.gSHA,
#                      no tag -> cli.Version~gSHA, e.g. 0.1.0~g5ef5312)
# Prints the package's path on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "scripts/package.sh: $*" >&2; exit 1; }

# deb_version: the package's version, which Debian wants to start with a digit.
deb_version() {
	local base desc v
	base=$(sed -n 's/^const Version = "\(.*\)"$/\1/p' cli/cli.go)
	[ -n "$base" ] || die "no 'const Version' in cli/cli.go"
	if desc=$(git describe --tags 2>/dev/null); then
		# A tag (v1.2.3, or v1.2.3-4-gSHA past it): a pre-release's - sorts first (~).
		v=$(printf '%s' "${desc#v}" | sed -E 's/-([0-9]+)-g([0-9a-f]+)$/+\1.g\2/' | tr -- '-_' '~~')
	elif desc=$(git describe --always 2>/dev/null); then
		v="$base~g$desc" # no tag: before the release $base
	else
		v=$base
	fi
	if ! printf '%s' "$v" | grep -Eq '^[0-9][A-Za-z0-9.+~]*$'; then
		v=$base
	fi
	printf '%s' "$v"
}

# libc_depends BIN: libc6 at the newest glibc symbol version BIN needs (cgo
# links SQLite against glibc; nfpm does not compute shared-library depends).
libc_depends() {
	local newest=""
	if command -v objdump >/dev/null 2>&1; then
		newest=$(objdump -T "$1" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n 1 || true)
	fi
	if [ -n "$newest" ]; then printf 'libc6 (>= %s)' "$newest"; else printf 'libc6'; fi
}

# unit SRC DST: deploy/pacer.service for the package's paths, its install
# steps (for a manual install) replaced by a note.
unit() {
	{
		cat <<'HDR'
# pacer as a hardened systemd service, installed by the pacer Debian package
# (deploy/pacer.service with the package's paths). Change settings with a
# drop-in (`systemctl edit pacer`), not here: an upgrade replaces this file.
# The config is /etc/pacer/config.yaml (root-owned, group pacer, 0640); the
# state /var/lib/pacer (StateDirectory, owned by the system user pacer).
HDR
		sed -n '/^\[Unit\]$/,$p' "$1" |
			sed -e 's#/usr/local/bin/pacer#/usr/bin/pacer#g' \
				-e 's#-config ${CONFIGURATION_DIRECTORY}/config.yaml#-config /etc/pacer/config.yaml#' \
				-e 's#/usr/local/share/doc/pacer#/usr/share/doc/pacer#g'
	} >"$2"
	grep -q '^ExecStart=/usr/bin/pacer run -config /etc/pacer/config.yaml$' "$2" ||
		die "deploy/pacer.service: its ExecStart= no longer matches what this script rewrites"
}

[ "$(go env GOOS)/$(go env GOARCH)" = linux/amd64 ] || die "builds an amd64 package on linux/amd64 only"
version=${PACER_DEB_VERSION:-$(deb_version)}
dist=${PACER_DIST:-dist}
stage=$(mktemp -d "${TMPDIR:-/tmp}/pacer-package-XXXXXX")
trap 'rm -rf "$stage"' EXIT

if [ -n "${PACER_BIN:-}" ]; then
	install -m 0755 "$PACER_BIN" "$stage/pacer"
else
	# As the README builds it (cgo for SQLite).
	CGO_ENABLED=1 go build -o "$stage/pacer" .
fi
unit deploy/pacer.service "$stage/pacer.service"

mkdir -p "$dist"
out="$dist/pacer_${version}_amd64.deb"
PACER_DEB_VERSION=$version PACER_DEB_DEPENDS=$(libc_depends "$stage/pacer") PACER_STAGE=$stage \
	go tool nfpm package --config deploy/nfpm.yaml --packager deb --target "$out" >&2
echo "$out"
