#!/bin/sh
# Builds hello.wasm with the AssemblyScript compiler and json-as from npm
# (npm ci here first). --use abort=dsh/abort keeps the module from
# importing env.abort, which the host refuses.
set -eu
cd "$(dirname "$0")"
out="${1:-hello.wasm}"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
./node_modules/.bin/asc hello.ts --transform json-as/transform --use abort=dsh/abort \
	--runtime incremental --optimizeLevel 2 --shrinkLevel 1 --noAssert --outFile "$out"
