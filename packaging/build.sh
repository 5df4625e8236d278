#!/usr/bin/env bash
# Release binaries and packages for cairn, into dist/ (or $DIST).
#
#   packaging/build.sh                         # every target, then .deb and .rpm for linux/amd64 and linux/arm64
#   packaging/build.sh linux/amd64             # only the named targets (their packages too)
#   PACKAGES= packaging/build.sh               # binaries only
#   PACKAGES=deb VERSION=1.2.3 packaging/build.sh linux/amd64
#
# Targets: linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64
# (windows only as a build check: cairn does not run there). Static binaries
# (CGO_ENABLED=0), -trimpath, the version and build date stamped into `cairn version`
# (the commit comes from go's own VCS stamp).
# VERSION defaults to `git describe --tags --always --dirty`, a leading "v"
# dropped; the packages need a semantic version, so one that is not (no tag
# yet) is packaged as 0.0.0-dev+g<describe>.
# Output: dist/cairn-<os>-<arch>[.exe], dist/cairn_<version>_<arch>.deb, .rpm.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

ALL_TARGETS="linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64"
targets="${*:-$ALL_TARGETS}"
DIST="${DIST:-$root/dist}"
PACKAGES="${PACKAGES-deb rpm}"
NFPM="${NFPM:-go run github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.45.2}"

if [ -z "${VERSION:-}" ]; then
	VERSION="$(git describe --tags --always --dirty 2>/dev/null || echo dev)"
fi
VERSION="${VERSION#v}"
if [[ "$VERSION" =~ ^[0-9]+\.[0-9]+\.[0-9]+ ]]; then
	PKG_VERSION="$VERSION"
else
	PKG_VERSION="0.0.0-dev+g$(echo "$VERSION" | tr -c 'A-Za-z0-9.\n' '.')"
fi

# The build date `cairn version` prints: SOURCE_DATE_EPOCH's (reproducible
# builds), else now.
BUILD_DATE="$(date -u -d "@${SOURCE_DATE_EPOCH:-$(date +%s)}" +%Y-%m-%dT%H:%M:%SZ 2>/dev/null || date -u +%Y-%m-%dT%H:%M:%SZ)"

mkdir -p "$DIST"
for t in $targets; do
	os="${t%/*}" arch="${t#*/}"
	case " $ALL_TARGETS " in *" $t "*) ;; *) echo "build.sh: unknown target $t (want one of: $ALL_TARGETS)" >&2; exit 2 ;; esac
	out="$DIST/cairn-$os-$arch"
	[ "$os" = windows ] && out="$out.exe"
	echo "== $t -> ${out#"$root"/}"
	CGO_ENABLED=0 GOOS="$os" GOARCH="$arch" go build -trimpath \
		-ldflags "-s -w -X github.com/cairn-dev/cairn/cmd/cairn/cli.Version=$VERSION -X github.com/cairn-dev/cairn/cmd/cairn/cli.BuildDate=$BUILD_DATE" \
		-o "$out" ./cmd/cairn
done

for t in $targets; do
	os="${t%/*}" arch="${t#*/}"
	[ "$os" = linux ] || continue
	for p in $PACKAGES; do
		echo "== $p $arch ($PKG_VERSION)"
		VERSION="$PKG_VERSION" GOARCH="$arch" CAIRN_BIN="$DIST/cairn-linux-$arch" \
			$NFPM package --config packaging/nfpm.yaml --packager "$p" --target "$DIST/"
	done
done
