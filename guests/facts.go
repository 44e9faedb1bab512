package guests

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// FactsConfig is the config a host passes to builtin:facts. Platform is
// GOOS/GOARCH; Timezone is an IANA zone name. Empty fields are omitted, and
// the plugin's variable then has no value.
type FactsConfig struct {
	Platform string `json:"platform,omitempty"`
	Timezone string `json:"timezone,omitempty"`
}

// HostFacts returns the facts plugin's config for this host: the platform
// the host runs on and, when it can be named, the host's local time zone.
// The plugin cannot learn either from inside wasip1.
func HostFacts() FactsConfig {
	zone, _ := zoneName(time.Local, "/etc/localtime", "/etc/timezone")
	return FactsConfig{Platform: runtime.GOOS + "/" + runtime.GOARCH, Timezone: zone}
}

// zoneName names the IANA zone of loc, the host's local zone. Go names
// time.Local after $TZ when $TZ picked a zone, "UTC" when it fell back to
// UTC, and "Local" when it read the system default (localtime, on Unix a
// symlink into the zoneinfo tree; timezone holds the name on Debian). It
// returns false when no name can be found, or when the name found does not
// keep loc's offsets (a stale /etc/timezone, say): a wrong zone would give
// the model a wrong date for part of every day.
func zoneName(loc *time.Location, localtime, timezone string) (string, bool) {
	name := loc.String()
	switch {
	case name == "UTC":
		return name, true
	case name == "Local":
		name = zoneFromPath(localtime)
		if name == "" {
			if b, err := os.ReadFile(timezone); err == nil {
				name = strings.TrimSpace(string(b))
			}
		}
	case strings.HasPrefix(name, "/"): // TZ named a zoneinfo file
		name = zoneFromPath(name)
	}
	if name == "" || name == "Local" {
		return "", false
	}
	named, err := time.LoadLocation(name)
	if err != nil || !sameOffsets(named, loc) {
		return "", false
	}
	return name, true
}

// zoneFromPath names the zone of a zoneinfo file by its path below a
// zoneinfo directory, following symlinks: /usr/share/zoneinfo/Europe/Paris
// is "Europe/Paris".
func zoneFromPath(path string) string {
	resolved, err := filepath.EvalSymlinks(path)
	if err != nil {
		return ""
	}
	resolved = filepath.ToSlash(resolved)
	const marker = "/zoneinfo/"
	i := strings.LastIndex(resolved, marker)
	if i < 0 {
		return ""
	}
	// The posix/ and right/ trees hold the same zones under a prefix (right/
	// counts leap seconds, which cannot move a date); the guest's embedded
	// database knows only the plain names.
	name := resolved[i+len(marker):]
	for _, prefix := range []string{"posix/", "right/"} {
		name = strings.TrimPrefix(name, prefix)
	}
	return name
}

// sameOffsets reports whether a and b agree on the UTC offset over the
// coming year, sampled monthly, which covers both sides of any DST rule.
func sameOffsets(a, b *time.Location) bool {
	t := time.Now()
	for range 13 {
		_, oa := t.In(a).Zone()
		_, ob := t.In(b).Zone()
		if oa != ob {
			return false
		}
		t = t.AddDate(0, 1, 0)
	}
	return true
}
