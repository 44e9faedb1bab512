package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"charm.land/bubbles/v2/spinner"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"
	"charm.land/glamour/v2"
	"charm.land/lipgloss/v2"

	"github.com/dsh-wasm/dsh-wasm/runtime/deploy"
	"github.com/dsh-wasm/dsh-wasm/runtime/model"
	"github.com/dsh-wasm/dsh-wasm/runtime/session"
)

// runInteractive runs the terminal UI on the session until the user
// quits. Finished output (answers, tool cards, usage) is printed above
// the live area, so it stays in the terminal's scrollback.
func runInteractive(ctx context.Context, s streams, sess *deploy.Session, replay string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	m := newTUI(ctx, sess, replay)
	p := tea.NewProgram(m, tea.WithContext(ctx), tea.WithInput(s.in), tea.WithOutput(s.out))
	_, err := p.Run()
	if errors.Is(err, tea.ErrProgramKilled) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

var (
	dimStyle    = lipgloss.NewStyle().Faint(true)
	accentStyle = lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("12"))
	okStyle     = lipgloss.NewStyle().Foreground(lipgloss.Color("10"))
	failStyle   = lipgloss.NewStyle().Foreground(lipgloss.Color("9"))
	bannerStyle = lipgloss.NewStyle().Border(lipgloss.RoundedBorder()).BorderForeground(lipgloss.Color("12")).Padding(0, 1)
)

type (
	eventMsg    struct{ e session.Event }
	streamEnd   struct{}
	turnDoneMsg struct {
		res deploy.TurnResult
		err error
	}
)

// toolCard is one tool call on screen.
type toolCard struct {
	id, name, summary string
}

type tui struct {
	ctx    context.Context
	sess   *deploy.Session
	stream *deploy.Stream
	replay string

	input   textinput.Model
	spin    spinner.Model
	history []string
	histPos int // index into history while browsing; len(history) when not
	width   int
	md      *glamour.TermRenderer
	mdWidth int

	running    bool
	cancelling bool
	reasoning  strings.Builder
	text       strings.Builder
	cards      []toolCard
	usage      model.Usage
	steps      int
}

func newTUI(ctx context.Context, sess *deploy.Session, replay string) *tui {
	in := textinput.New()
	in.Prompt = "› "
	in.Placeholder = "Ask the agent; /exit quits"
	in.Focus()
	sp := spinner.New(spinner.WithSpinner(spinner.Dot))
	return &tui{ctx: ctx, sess: sess, stream: sess.Follow(), replay: replay, input: in, spin: sp, width: 80}
}

func (m *tui) Init() tea.Cmd {
	intro := m.banner()
	if h := m.conversation(); h != "" {
		intro += "\n" + h
	}
	return tea.Batch(tea.Println(intro), m.waitEvent(), m.spin.Tick, textinput.Blink)
}

// conversation renders a resumed session's conversation so far: each prompt
// and each answer's text, with the tool calls counted.
func (m *tui) conversation() string {
	var b strings.Builder
	calls := 0
	flush := func() {
		if calls > 0 {
			noun := "tool calls"
			if calls == 1 {
				noun = "tool call"
			}
			b.WriteString(dimStyle.Render(fmt.Sprintf("  (%d %s)", calls, noun)) + "\n")
			calls = 0
		}
	}
	for _, e := range m.sess.History() {
		switch e.Type {
		case session.TypeUserMessage:
			u, err := session.As[session.UserMessage](e)
			if err == nil {
				flush()
				b.WriteString(accentStyle.Render("› ") + u.Content.Text() + "\n")
			}
		case session.TypeToolCall:
			calls++
		case session.TypeAssistantMessage:
			a, err := session.As[session.AssistantMessage](e)
			if err != nil {
				continue
			}
			for _, p := range a.Content {
				if p.Type == model.BlockText && strings.TrimSpace(p.Text) != "" {
					flush()
					b.WriteString(m.markdown(p.Text) + "\n")
				}
			}
		}
	}
	flush()
	if b.Len() == 0 {
		return ""
	}
	return dimStyle.Render("resumed; the conversation so far:") + "\n" + strings.TrimRight(b.String(), "\n")
}

func (m *tui) banner() string {
	modelName := m.sess.Model()
	if modelName == "" {
		modelName = "(the provider's default)"
	}
	lines := []string{
		accentStyle.Render("dsh-wasm") + dimStyle.Render(" · sandboxed Wasm tools"),
		"model    " + modelName,
		"cwd      " + m.sess.Cwd(),
		"session  " + m.sess.ID(),
	}
	if m.replay != "" {
		lines = append(lines, failStyle.Render("replay   the model is a replay of "+m.replay))
	}
	lines = append(lines, dimStyle.Render("Enter sends · Ctrl-C cancels a turn, twice quits · /exit quits"))
	return bannerStyle.Render(strings.Join(lines, "\n"))
}

// waitEvent waits for the session's next event.
func (m *tui) waitEvent() tea.Cmd {
	st, ctx := m.stream, m.ctx
	return func() tea.Msg {
		e, err := st.Next(ctx)
		if err != nil {
			return streamEnd{}
		}
		return eventMsg{e}
	}
}

func (m *tui) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width = msg.Width
		m.input.SetWidth(max(10, msg.Width-4))
		return m, nil
	case tea.KeyPressMsg:
		return m.key(msg)
	case eventMsg:
		out := m.event(msg.e)
		return m, tea.Batch(out, m.waitEvent())
	case streamEnd:
		return m, nil
	case turnDoneMsg:
		m.running, m.cancelling = false, false
		// A turn that did not complete is shown by its turn/end event.
		var te *deploy.TurnError
		if msg.err != nil && !errors.As(msg.err, &te) {
			return m, tea.Println(failStyle.Render("error: " + msg.err.Error()))
		}
		return m, nil
	case spinner.TickMsg:
		var cmd tea.Cmd
		m.spin, cmd = m.spin.Update(msg)
		return m, cmd
	}
	var cmd tea.Cmd
	m.input, cmd = m.input.Update(msg)
	return m, cmd
}

func (m *tui) key(k tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	switch k.String() {
	case "ctrl+c":
		if m.running && !m.cancelling {
			m.cancelling = true
			m.sess.Cancel("interrupted")
			return m, nil
		}
		return m, tea.Quit
	case "ctrl+d":
		if m.input.Value() == "" && !m.running {
			return m, tea.Quit
		}
	case "up":
		if m.histPos > 0 {
			m.histPos--
			m.input.SetValue(m.history[m.histPos])
			m.input.CursorEnd()
		}
		return m, nil
	case "down":
		if m.histPos < len(m.history) {
			m.histPos++
			if m.histPos == len(m.history) {
				m.input.SetValue("")
			} else {
				m.input.SetValue(m.history[m.histPos])
			}
			m.input.CursorEnd()
		}
		return m, nil
	case "enter":
		text := strings.TrimSpace(m.input.Value())
		if text == "" {
			return m, nil
		}
		if text == "/exit" || text == "/quit" {
			return m, tea.Quit
		}
		if m.running {
			return m, nil // one turn at a time; the text stays for later
		}
		m.input.SetValue("")
		if len(m.history) == 0 || m.history[len(m.history)-1] != text {
			m.history = append(m.history, text)
		}
		m.histPos = len(m.history)
		m.running, m.cancelling = true, false
		m.usage, m.steps = model.Usage{}, 0
		sess, ctx := m.sess, m.ctx
		return m, tea.Batch(
			tea.Println(accentStyle.Render("› ")+text),
			func() tea.Msg {
				res, err := sess.Prompt(ctx, text)
				return turnDoneMsg{res, err}
			})
	}
	var cmd tea.Cmd
	m.input, cmd = m.input.Update(k)
	return m, cmd
}

// event folds one session event into the screen; what is finished is
// printed above the live area.
func (m *tui) event(e session.Event) tea.Cmd {
	switch e.Type {
	case session.TypeAssistantChunk:
		c, err := session.As[session.AssistantChunk](e)
		if err != nil {
			return nil
		}
		switch c.Chunk.Type {
		case model.ChunkReasoningDelta:
			m.reasoning.WriteString(c.Chunk.Text)
		case model.ChunkTextDelta:
			m.text.WriteString(c.Chunk.Text)
		}
	case session.TypeAssistantMessage:
		a, err := session.As[session.AssistantMessage](e)
		if err != nil {
			return nil
		}
		m.steps++
		if a.Usage != nil {
			m.usage.InputTokens += a.Usage.InputTokens
			m.usage.OutputTokens += a.Usage.OutputTokens
			m.usage.CacheReadTokens += a.Usage.CacheReadTokens
			m.usage.ReasoningTokens += a.Usage.ReasoningTokens
		}
		var parts []string
		for _, p := range a.Content {
			switch {
			case p.Type == model.BlockReasoning && strings.TrimSpace(p.Text) != "":
				parts = append(parts, dimStyle.Render(wrap(strings.TrimSpace(p.Text), m.width-2)))
			case p.Type == model.BlockText && strings.TrimSpace(p.Text) != "":
				parts = append(parts, m.markdown(p.Text))
			}
		}
		m.reasoning.Reset()
		m.text.Reset()
		if len(parts) > 0 {
			return tea.Println(strings.Join(parts, "\n"))
		}
	case session.TypeToolCall:
		c, err := session.As[session.ToolCall](e)
		if err != nil {
			return nil
		}
		m.cards = append(m.cards, toolCard{id: c.CallID, name: c.Name, summary: argSummary(c.Name, c.Arguments)})
	case session.TypeToolResult:
		r, err := session.As[session.ToolResult](e)
		if err != nil {
			return nil
		}
		card := toolCard{id: r.CallID, name: "tool"}
		for i, c := range m.cards {
			if c.id == r.CallID {
				card = c
				m.cards = append(m.cards[:i], m.cards[i+1:]...)
				break
			}
		}
		return tea.Println(m.renderCard(card, r))
	case "todo/write": // tool-todo's list, as it accepted it
		var list struct {
			Todos []struct{ Content, Status string } `json:"todos"`
		}
		if json.Unmarshal(e.Data, &list) != nil || len(list.Todos) == 0 {
			return nil
		}
		lines := []string{accentStyle.Render("plan")}
		for _, td := range list.Todos {
			switch td.Status {
			case "completed":
				lines = append(lines, okStyle.Render("  ✓ ")+dimStyle.Render(td.Content))
			case "in_progress":
				lines = append(lines, accentStyle.Render("  ▸ ")+td.Content)
			default:
				lines = append(lines, "  ○ "+td.Content)
			}
		}
		return tea.Println(strings.Join(lines, "\n"))
	case session.TypeTurnEnd:
		t, err := session.As[session.TurnEnd](e)
		if err != nil {
			return nil
		}
		line := fmt.Sprintf("tokens: %d in (%d cached) · %d out (%d reasoning) · %d steps",
			m.usage.InputTokens+m.usage.CacheReadTokens, m.usage.CacheReadTokens,
			m.usage.OutputTokens, m.usage.ReasoningTokens, m.steps)
		if t.Reason.Kind != session.EndCompleted {
			end := "turn " + t.Reason.Kind
			if t.Reason.Message != "" {
				end += ": " + t.Reason.Message
			} else if t.Reason.Reason != "" {
				end += " (" + t.Reason.Reason + ")"
			}
			return tea.Println(failStyle.Render(end) + "\n" + dimStyle.Render(line) + "\n")
		}
		return tea.Println(dimStyle.Render(line) + "\n")
	}
	return nil
}

func (m *tui) renderCard(c toolCard, r session.ToolResult) string {
	head := accentStyle.Render("⏺ "+c.name) + " " + c.summary
	mark, style := "✓", okStyle
	if r.IsError {
		mark, style = "✗", failStyle
	}
	out := strings.TrimRight(r.Content.Text(), "\n")
	lines := strings.Split(out, "\n")
	const keep = 6
	if len(lines) > keep {
		lines = append(lines[:keep], fmt.Sprintf("… %d more lines", len(lines)-keep))
	}
	for i, l := range lines {
		lines[i] = truncate(l, max(20, m.width-6))
	}
	return head + "\n  " + style.Render("⎿ "+mark) + " " + strings.Join(lines, "\n    ")
}

// argSummary is the part of a call's arguments worth a glance.
func argSummary(name, args string) string {
	var a map[string]any
	if json.Unmarshal([]byte(args), &a) == nil {
		for _, k := range []string{"command", "file_path", "url", "pattern", "prompt"} {
			if v, ok := a[k].(string); ok && v != "" {
				return truncate(strings.ReplaceAll(v, "\n", " "), 100)
			}
		}
		if todos, ok := a["todos"].([]any); ok {
			return fmt.Sprintf("%d todos", len(todos))
		}
	}
	return dimStyle.Render(truncate(args, 100))
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// wrap breaks text at spaces to lines of at most width runes.
func wrap(text string, width int) string {
	if width < 20 {
		width = 20
	}
	var b strings.Builder
	for i, para := range strings.Split(text, "\n") {
		if i > 0 {
			b.WriteByte('\n')
		}
		n := 0
		for j, w := range strings.Fields(para) {
			if j > 0 && n+1+len([]rune(w)) > width {
				b.WriteByte('\n')
				n = 0
			} else if j > 0 {
				b.WriteByte(' ')
				n++
			}
			b.WriteString(w)
			n += len([]rune(w))
		}
	}
	return b.String()
}

// markdown renders text for the terminal, or returns it as it is when it
// cannot.
func (m *tui) markdown(text string) string {
	width := max(20, min(m.width-2, 120))
	if m.md == nil || m.mdWidth != width {
		r, err := glamour.NewTermRenderer(glamour.WithStandardStyle("dark"), glamour.WithWordWrap(width))
		if err != nil {
			return text
		}
		m.md, m.mdWidth = r, width
	}
	out, err := m.md.Render(text)
	if err != nil {
		return text
	}
	return strings.Trim(out, "\n")
}

func (m *tui) View() tea.View {
	var b strings.Builder
	if r := strings.TrimSpace(m.reasoning.String()); r != "" {
		b.WriteString(dimStyle.Render(lastLines(wrap(r, m.width-2), 4)) + "\n")
	}
	if t := m.text.String(); strings.TrimSpace(t) != "" {
		b.WriteString(lastLines(m.markdown(t), 12) + "\n")
	}
	for _, c := range m.cards {
		b.WriteString(m.spin.View() + " " + accentStyle.Render(c.name) + " " + c.summary + "\n")
	}
	switch {
	case m.cancelling:
		b.WriteString(failStyle.Render("cancelling… (Ctrl-C again quits)") + "\n")
	case m.running:
		b.WriteString(m.spin.View() + dimStyle.Render(" working · Ctrl-C cancels") + "\n")
	}
	b.WriteString(m.input.View())
	return tea.NewView(b.String())
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
