#!/bin/sh
# Builds hello.wasm with Go 1.24 or later (wasip1, c-shared).
set -eu
cd "$(dirname "$0")"
GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -o "${1:-hello.wasm}" .
