#!/bin/sh
# Builds the example plugin, pins it and runs examples/plugin-pair.yaml
# with its real path and digest. Offline; needs only Go.
set -eu
cd "$(dirname "$0")/.."
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
go build -o "$dir/wordcount" ./plugins/examples/wordcount
go build -o "$dir/spice-orch" ./cmd/spice-orch
sum="$("$dir/spice-orch" plugin digest "$dir/wordcount")"
sed -e "s#/path/to/wordcount#$dir/wordcount#" \
    -e "s#0000000000000000000000000000000000000000000000000000000000000000#$sum#" \
    examples/plugin-pair.yaml > "$dir/plugin-pair.yaml"
"$dir/spice-orch" plugin describe --sha256 "$sum" "$dir/wordcount"
"$dir/spice-orch" run "$dir/plugin-pair.yaml" "$@"
