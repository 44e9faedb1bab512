package prereq

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMissingFailsUnderCI runs a probe test in a child process with and
// without CI=true: it must fail under CI and skip otherwise.
func TestMissingFailsUnderCI(t *testing.T) {
	if os.Getenv("PREREQ_PROBE") == "1" {
		Missing(t, "the widget is not installed")
		t.Fatal("Missing returned")
	}
	for _, ci := range []string{"true", ""} {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestMissingFailsUnderCI$", "-test.v")
		cmd.Env = append(os.Environ(), "PREREQ_PROBE=1", "CI="+ci)
		out, err := cmd.CombinedOutput()
		s := string(out)
		switch ci {
		case "true":
			if err == nil || !strings.Contains(s, "--- FAIL") || !strings.Contains(s, "prerequisite missing under CI=true (.ci/run installs it): the widget is not installed") {
				t.Errorf("CI=true: err %v, output:\n%s", err, s)
			}
		default:
			if err != nil || !strings.Contains(s, "--- SKIP") || !strings.Contains(s, "the widget is not installed") {
				t.Errorf("no CI: err %v, output:\n%s", err, s)
			}
		}
	}
}
