// Package sandbox is the home of dsh-wasm's plugin confinement: the
// filesystem jail (fsjail), the command runner (execjail) and the HTTP
// fetcher behind net grants (netguard). The plugin host
// (internal/plugin) combines them with wazero's memory and compute limits
// and with its own validation of every host-function call.
//
// This package itself holds no code; its tests are the hostile-plugin
// suite, TestHostile, which loads deliberately malicious plugins (their
// sources are in testdata/hostile) through the real plugin host and
// checks that every boundary docs/SECURITY.md describes holds.
package sandbox
