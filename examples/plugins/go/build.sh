#!/bin/sh
# Builds hello.wasm with Go (wasip1, c-shared); the Go version must be at
# least the one the SDK's go.mod names.
set -eu
cd "$(dirname "$0")"
GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -o "${1:-hello.wasm}" .
