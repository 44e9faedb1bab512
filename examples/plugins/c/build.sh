#!/bin/sh
# Builds hello.wasm with Debian's clang and wasi-libc
# (apt-get install clang lld wasi-libc libclang-rt-dev-wasm32).
set -eu
cd "$(dirname "$0")"
clang --target=wasm32-wasi -mexec-model=reactor -O2 -Wall -Wextra -o "${1:-hello.wasm}" hello.c
