package session_test

import (
	"fmt"
	"log"
	"os"

	"github.com/dsh-wasm/dsh-wasm/runtime/session"
	"github.com/dsh-wasm/dsh-wasm/runtime/session/filestore"
)

// An agent loop records a turn, flushes it at the turn's end, and later
// resumes the session.
func Example() {
	root, err := os.MkdirTemp("", "sessions")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(root)
	store := filestore.New(root, filestore.Options{})

	s, err := store.Create(session.Header{Cwd: "/home/me/project"})
	if err != nil {
		log.Fatal(err)
	}
	user := &session.Source{Kind: session.SourceUser}
	for _, e := range []session.Event{
		session.NewEvent(session.TurnStart{Turn: 1, Trigger: &session.Trigger{Kind: session.TriggerMessage, Source: user}}),
		session.NewEvent(session.UserMessage{Content: session.TextContent("Say hi."), Source: *user}),
		session.NewEvent(session.StepStart{Turn: 1, Step: 1}),
		// ... the model's chunks as assistant/chunk events ...
		session.NewEvent(session.AssistantMessage{Turn: 1, Step: 1, Content: session.TextContent("hi")}),
		session.NewEvent(session.StepEnd{Turn: 1, Step: 1}),
		session.NewEvent(session.TurnEnd{Turn: 1, Reason: session.EndReason{Kind: session.EndCompleted}}),
	} {
		if _, err := s.Append(e); err != nil {
			log.Fatal(err)
		}
	}
	if err := s.Flush(); err != nil { // turn end: now durable
		log.Fatal(err)
	}
	id := s.Header().ID
	if err := s.Close(); err != nil {
		log.Fatal(err)
	}

	s, err = store.Open(id)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	fmt.Println("repairs:", s.Recovery())
	for _, m := range s.Messages() {
		fmt.Printf("%s: %s\n", m.Role, session.Parts(m.Content).Text())
	}
	// Output:
	// repairs: no repairs
	// user: Say hi.
	// assistant: hi
}
