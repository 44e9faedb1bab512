package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	acp "github.com/coder/acp-go-sdk"

	"github.com/dsh-wasm/dsh-wasm/internal/prereq"
	"github.com/dsh-wasm/dsh-wasm/internal/testcorpus"
)

// strictFrame is one thing a client saw, in canonical JSON (sorted keys,
// the session id and the workspace replaced by the corpus's placeholders):
// a session/update's update, a response's result or error, or a
// permission request. Adjacent message or thought chunks are joined into
// one, since how a stream is cut into chunks is the model's, not the
// agent's.
type strictFrame struct {
	kind string // "update", "response", "error" or "permission"
	body map[string]any
}

func (f strictFrame) String() string {
	b, err := json.Marshal(f.body)
	if err != nil {
		return fmt.Sprintf("%s <%v>", f.kind, err)
	}
	return f.kind + " " + string(b)
}

// appendFrame adds f to frames, joining it to the previous frame when both
// are chunks of the same stream.
func appendFrame(frames []strictFrame, f strictFrame) []strictFrame {
	if f.kind == "update" && len(frames) > 0 {
		last := frames[len(frames)-1]
		kind, _ := f.body["sessionUpdate"].(string)
		if (kind == "agent_message_chunk" || kind == "agent_thought_chunk") && last.kind == "update" && last.body["sessionUpdate"] == kind {
			prev, _ := last.body["content"].(map[string]any)
			next, _ := f.body["content"].(map[string]any)
			if prev != nil && next != nil && prev["type"] == "text" && next["type"] == "text" {
				a, _ := prev["text"].(string)
				b, _ := next["text"].(string)
				joined := map[string]any{}
				for k, v := range last.body {
					joined[k] = v
				}
				joined["content"] = map[string]any{"type": "text", "text": a + b}
				frames[len(frames)-1] = strictFrame{kind: "update", body: joined}
				return frames
			}
		}
	}
	return append(frames, f)
}

// normalize replaces the run's session ids and workspace with the corpus's
// placeholders everywhere in v.
func normalize(v map[string]any, cwd string, sessionIDs []string) map[string]any {
	b, err := json.Marshal(v)
	if err != nil {
		return map[string]any{"unmarshalable": err.Error()}
	}
	s := string(b)
	if cwd != "" {
		s = strings.ReplaceAll(s, cwd, "{{cwd}}")
	}
	for _, id := range sessionIDs {
		if id != "" {
			s = strings.ReplaceAll(s, id, "{{sessionId}}")
		}
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return map[string]any{"unmarshalable": err.Error()}
	}
	return out
}

// withDefaults rewrites an initialize result as a client reads it: with
// the protocol's defaults for what it leaves out (an absent
// promptCapabilities.image is false). The ACP library this agent is built
// on leaves false capabilities out and sends empty defaults in, where the
// reference writes them out; a client cannot tell the two apart. Any other
// response is unchanged.
func withDefaults(result map[string]any) map[string]any {
	if _, ok := result["protocolVersion"]; !ok {
		return result
	}
	b, err := json.Marshal(result)
	if err != nil {
		return map[string]any{"unmarshalable": err.Error()}
	}
	var r acp.InitializeResponse
	if err := json.Unmarshal(b, &r); err != nil {
		return map[string]any{"unreadable initialize result": err.Error()}
	}
	caps := r.AgentCapabilities
	out := map[string]any{"protocolVersion": r.ProtocolVersion, "agentInfo": r.AgentInfo, "authMethods": r.AuthMethods,
		"loadSession": caps.LoadSession, "mcp": caps.McpCapabilities, "auth": caps.Auth,
		"prompt": map[string]any{"image": caps.PromptCapabilities.Image, "audio": caps.PromptCapabilities.Audio,
			"embeddedContext": caps.PromptCapabilities.EmbeddedContext},
		"session": caps.SessionCapabilities, "meta": r.Meta}
	b, err = json.Marshal(out)
	if err != nil {
		return map[string]any{"unmarshalable": err.Error()}
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return map[string]any{"unmarshalable": err.Error()}
	}
	return m
}

// withoutNullOldText drops a diff's "oldText": null, which the reference
// writes for a new file and the ACP library this agent is built on leaves
// out; the protocol reads both as no old text.
func withoutNullOldText(update map[string]any) map[string]any {
	content, _ := update["content"].([]any)
	for _, c := range content {
		if d, ok := c.(map[string]any); ok && d["type"] == "diff" {
			if v, ok := d["oldText"]; ok && v == nil {
				delete(d, "oldText")
			}
		}
	}
	return update
}

// goldenFrames reads a scenario's stdout.golden.jsonl as strict frames.
func goldenFrames(t *testing.T, path string) []strictFrame {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var frames []strictFrame
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var m struct {
			ID     *int           `json:"id"`
			Method string         `json:"method"`
			Params map[string]any `json:"params"`
			Result map[string]any `json:"result"`
			Error  map[string]any `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		switch {
		case m.Method == "session/update":
			u, _ := m.Params["update"].(map[string]any)
			frames = appendFrame(frames, strictFrame{kind: "update", body: withoutNullOldText(u)})
		case m.Method == "session/request_permission":
			frames = appendFrame(frames, strictFrame{kind: "permission", body: m.Params})
		case m.ID != nil && m.Method == "" && m.Error != nil:
			frames = appendFrame(frames, strictFrame{kind: "error", body: map[string]any{"code": m.Error["code"], "message": m.Error["message"]}})
		case m.ID != nil && m.Method == "":
			frames = appendFrame(frames, strictFrame{kind: "response", body: withDefaults(m.Result)})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return frames
}

// acpRun is what internal/acpdriver prints of one run.
type acpRun struct {
	Transcript []struct {
		Type    string         `json:"type"`
		Update  map[string]any `json:"update"`
		Request map[string]any `json:"request"`
		Result  map[string]any `json:"result"`
		Error   *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	} `json:"transcript"`
	Exit struct {
		Code *int `json:"code"`
	} `json:"exit"`
}

// frames turns a driver transcript into strict frames.
func (r acpRun) frames(cwd string) []strictFrame {
	var ids []string
	for _, it := range r.Transcript {
		if id, ok := it.Result["sessionId"].(string); ok {
			ids = append(ids, id)
		}
	}
	var frames []strictFrame
	for _, it := range r.Transcript {
		switch {
		case it.Type == "update":
			frames = appendFrame(frames, strictFrame{kind: "update", body: withoutNullOldText(normalize(it.Update, cwd, ids))})
		case it.Type == "permission":
			frames = appendFrame(frames, strictFrame{kind: "permission", body: normalize(it.Request, cwd, ids)})
		case it.Error != nil:
			frames = appendFrame(frames, strictFrame{kind: "error", body: map[string]any{"code": float64(it.Error.Code), "message": it.Error.Message}})
		default:
			frames = appendFrame(frames, strictFrame{kind: "response", body: withDefaults(normalize(it.Result, cwd, ids))})
		}
	}
	return frames
}

// firstDifference describes where two frame sequences part, or is "" when
// they are the same.
func firstDifference(have, want []strictFrame) string {
	for i := 0; i < len(have) || i < len(want); i++ {
		var h, w string
		if i < len(have) {
			h = have[i].String()
		}
		if i < len(want) {
			w = want[i].String()
		}
		if h != w {
			return fmt.Sprintf("frame %d of %d (golden %d):\ngot  %s\nwant %s", i+1, len(have), len(want), h, w)
		}
	}
	return ""
}

// TestACPStrictConformance is the strict form of the conformance check:
// every scenario of the corpus (the plain sessions and the hook sessions)
// runs through `dsh-wasm acp --replay` with the example deployment as it
// ships (examples/acp-agent/dsh.yml, read, never rewritten), driven by the
// official ACP client library, with the agent started — PWD included —
// in a directory that is not the session's workspace, as an editor starts
// it. What the client saw must be the golden transcript: every
// session/update in order (titles, kinds, statuses, locations, content,
// rawInput, _meta, plans, the answer's text), every response and error.
func TestACPStrictConformance(t *testing.T) {
	corpus := testcorpus.Dir(t)
	node := needTool(t, "node", "the ACP conformance driver")
	driver, err := filepath.Abs(filepath.Join("..", "..", "internal", "acpdriver"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(driver, "node_modules", "@agentclientprotocol", "sdk")); err != nil {
		prereq.Missing(t, "the ACP client library is not installed; run npm ci --prefix %s: %v", driver, err)
	}
	bin := binary(t)
	config, err := filepath.Abs(exampleConfig("acp-agent"))
	if err != nil {
		t.Fatal(err)
	}
	var scenarios []string
	for _, set := range []string{"sessions", "hook-sessions"} {
		entries, err := os.ReadDir(filepath.Join(corpus, set))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.IsDir() {
				scenarios = append(scenarios, filepath.Join(corpus, set, e.Name()))
			}
		}
	}
	if len(scenarios) != 25 {
		t.Errorf("%d scenarios in the corpus, want 25", len(scenarios))
	}
	passed := 0
	for _, dir := range scenarios {
		name := filepath.Base(dir)
		ok := t.Run(name, func(t *testing.T) {
			cwd, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			if err := os.CopyFS(cwd, os.DirFS(filepath.Join(dir, "workspace"))); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			// Where the editor runs: not the workspace, and holding no
			// hook files of its own.
			elsewhere := t.TempDir()
			cmd := exec.Command(node, filepath.Join(driver, "driver.mjs"), filepath.Join(dir, "input.json"), cwd, "--",
				bin, "acp", "--config", config, "--replay", filepath.Join(dir, "session.jsonl"))
			cmd.Dir = elsewhere
			cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+t.TempDir(), "DSH_ACP_START_DIR="+elsewhere)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("driver: %v\nstderr:\n%s", err, stderr.String())
			}
			var run acpRun
			if err := json.Unmarshal(out, &run); err != nil {
				t.Fatalf("driver output: %v\n%s", err, out)
			}
			if run.Exit.Code == nil || *run.Exit.Code != 0 {
				t.Errorf("the agent exited %v; stderr:\n%s", run.Exit.Code, stderr.String())
			}
			if d := firstDifference(run.frames(cwd), goldenFrames(t, filepath.Join(dir, "stdout.golden.jsonl"))); d != "" {
				t.Errorf("%s: the client saw something else than the golden transcript, at %s\nstderr:\n%s", name, d, stderr.String())
			}
		})
		if ok {
			passed++
		}
	}
	t.Logf("strict conformance: %d/%d scenarios", passed, len(scenarios))
}
