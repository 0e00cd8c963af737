#!/usr/bin/env bash
# Regenerates the Go code for every .proto file under this directory.
#
# Usage: ./gen.sh [OUT_DIR]   (default: this directory, i.e. in place)
#
# protoc-gen-go is built from the version pinned in proto/go.mod (a `tool`
# directive) rather than taken from PATH, so the generated headers and code are
# identical on every machine and generate_test.go can detect stale output.
set -euo pipefail

cd "$(dirname "$0")"
out="${1:-.}"

if ! command -v protoc >/dev/null 2>&1; then
	echo "gen.sh: protoc not found in PATH; install it: apt-get install -y protobuf-compiler" >&2
	exit 1
fi

plugin_dir="$(mktemp -d)"
trap 'rm -rf "$plugin_dir"' EXIT
# GOWORK=off: the version must come from proto/go.mod, not from whatever the
# workspace's module graph selects.
GOWORK=off go build -o "$plugin_dir/protoc-gen-go" google.golang.org/protobuf/cmd/protoc-gen-go

mkdir -p "$out"
mapfile -t files < <(find svc -name '*.proto' | LC_ALL=C sort)
protoc \
	--plugin=protoc-gen-go="$plugin_dir/protoc-gen-go" \
	-I . \
	--go_out="$out" --go_opt=paths=source_relative \
	"${files[@]}"
