package config

import "regexp"

var subagentProviderRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)

// CheckSubagentProvider says why name cannot be granted under
// grants.subagents, or "" when it can: a provider name such as "spawn",
// "fork" or "acp".
func CheckSubagentProvider(name string) string {
	if !subagentProviderRE.MatchString(name) {
		return "want a subagent provider name such as spawn or fork ([a-z][a-z0-9_-]{0,63})"
	}
	return ""
}
