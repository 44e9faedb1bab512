//go:build wasip1

// Command facts is dsh-wasm's built-in facts plugin, loaded as
// builtin:facts. It contributes two prompt variables, each a one-line fact
// the host knows and the model does not:
//
//   - date: today's date as YYYY-MM-DD in the config's "timezone" (an IANA
//     name such as "Europe/Paris", or "UTC"). It changes once a day, so a
//     prompt that references it stays byte-identical all day and the
//     provider's prompt cache keeps hitting.
//   - platform: the host's operating system and architecture from the
//     config's "platform", as GOOS/GOARCH (e.g. "linux/amd64").
//
// A Wasm guest cannot learn either fact by itself: in here GOOS is wasip1,
// and wasip1 has no local time zone (time.Local is UTC). So the host states
// them in the config (guests.FactsConfig builds it), and a fact the config
// does not state has no value: a prompt that needs it fails to render
// instead of telling the model something false.
//
// The plugin registers no sections and no tools, and needs no capability.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
	_ "time/tzdata" // wasip1 has no zoneinfo files; the guest carries its own

	"github.com/dsh-wasm/dsh-wasm/hostfns/guest"
)

// config is the plugin's config: a JSON object (the host has checked that
// it is valid JSON). Absent or null keys leave their variable without a
// value; unknown keys are refused, so a misspelt key fails the load.
type config struct {
	Platform *string `json:"platform"`
	Timezone *string `json:"timezone"`
}

// maxPlatform bounds the platform string; real GOOS/GOARCH pairs are far
// shorter.
const maxPlatform = 64

func main() {}

func init() {
	guest.Main(setup)
}

func setup(p *guest.Plugin) error {
	c, err := parseConfig(p.Config)
	if err != nil {
		return fmt.Errorf("facts config: %w", err)
	}
	if err := p.Variable("date", dateVariable(c.loc)); err != nil {
		return err
	}
	return p.Variable("platform", platformVariable(c.platform))
}

// facts is the validated config.
type facts struct {
	platform string         // empty: no value
	loc      *time.Location // nil: no value
}

func parseConfig(raw []byte) (facts, error) {
	var c config
	if len(bytes.TrimSpace(raw)) > 0 {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.DisallowUnknownFields()
		if err := d.Decode(&c); err != nil {
			return facts{}, fmt.Errorf("want an object with optional keys \"platform\" and \"timezone\": %w", err)
		}
	}
	var f facts
	if c.Platform != nil {
		if err := checkPlatform(*c.Platform); err != nil {
			return facts{}, err
		}
		f.platform = *c.Platform
	}
	if c.Timezone != nil {
		loc, err := loadZone(*c.Timezone)
		if err != nil {
			return facts{}, err
		}
		f.loc = loc
	}
	return f, nil
}

// checkPlatform accepts GOOS/GOARCH: two non-empty runs of lower-case
// letters, digits and underscores joined by one slash.
func checkPlatform(s string) error {
	bad := func(why string) error {
		return fmt.Errorf("platform %q: %s; want GOOS/GOARCH such as \"linux/amd64\", or omit the key", s, why)
	}
	if s == "" {
		return bad("empty")
	}
	if len(s) > maxPlatform {
		return bad(fmt.Sprintf("longer than %d bytes", maxPlatform))
	}
	slash := -1
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_':
		case c == '/' && slash < 0:
			slash = i
		default:
			return bad(fmt.Sprintf("unexpected character %q", c))
		}
	}
	if slash <= 0 || slash == len(s)-1 {
		return bad("not of the form GOOS/GOARCH")
	}
	return nil
}

// loadZone resolves an IANA zone name from the embedded database. "Local"
// and "" are refused: inside wasip1 both mean UTC, which would be a guess
// presented as the host's zone.
func loadZone(name string) (*time.Location, error) {
	if name == "" || name == "Local" {
		return nil, fmt.Errorf("timezone %q: name the host's zone (an IANA name such as \"Europe/Paris\", or \"UTC\"), or omit the key", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("timezone %q: %w", name, err)
	}
	return loc, nil
}

func dateVariable(loc *time.Location) func(guest.Context) (string, bool, error) {
	return func(guest.Context) (string, bool, error) {
		if loc == nil {
			return "", false, nil
		}
		return time.Now().In(loc).Format(time.DateOnly), true, nil
	}
}

func platformVariable(platform string) func(guest.Context) (string, bool, error) {
	return func(guest.Context) (string, bool, error) {
		return platform, platform != "", nil
	}
}
