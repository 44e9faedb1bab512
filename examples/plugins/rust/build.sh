#!/bin/sh
# Builds hello.wasm with Debian's rustc and its wasm32 standard library
# (apt-get install rustc libstd-rust-dev-wasm32). Set RUSTC to use another
# rustc; a rustup toolchain names the target wasm32-wasip1.
set -eu
cd "$(dirname "$0")"
"${RUSTC:-rustc}" --edition 2021 --crate-type cdylib --target "${TARGET:-wasm32-wasi}" -C opt-level=2 -C strip=symbols -o "${1:-hello.wasm}" hello.rs
