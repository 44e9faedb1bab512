package pluginstate

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
)

func TestMemoryScopesClonesAndDeletes(t *testing.T) {
	m := NewMemory()
	var told []string
	m.OnSet = func(plugin, session, key string, value json.RawMessage) {
		told = append(told, plugin+"/"+session+"/"+key+"="+string(value))
	}
	v := json.RawMessage(`{"a":1}`)
	if err := m.Set("p", "s1", "k", v); err != nil {
		t.Fatal(err)
	}
	v[2] = 'b' // the store holds its own copy
	if got, ok, _ := m.Get("p", "s1", "k"); !ok || string(got) != `{"a":1}` {
		t.Fatalf("Get = %s, %v", got, ok)
	}
	if _, ok, _ := m.Get("p", "s2", "k"); ok {
		t.Fatal("state leaked across sessions")
	}
	if _, ok, _ := m.Get("q", "s1", "k"); ok {
		t.Fatal("state leaked across plugins")
	}
	if err := m.Set("p", "s1", "k", nil); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := m.Get("p", "s1", "k"); ok {
		t.Fatal("a nil value did not delete the key")
	}
	if len(told) != 2 || told[0] != `p/s1/k={"a":1}` || told[1] != "p/s1/k=" {
		t.Fatalf("OnSet told %q", told)
	}
}

func TestMemorySetWithinRefusesPastTheLimit(t *testing.T) {
	m := NewMemory()
	if err := m.SetWithin("p", "s", "a", json.RawMessage(`"12345"`), 10); err != nil {
		t.Fatal(err)
	}
	// "a" + 7 bytes held; "b" + 7 more would make 16.
	err := m.SetWithin("p", "s", "b", json.RawMessage(`"12345"`), 10)
	if !errors.Is(err, ErrFull) {
		t.Fatalf("err = %v, want ErrFull", err)
	}
	// Replacing a key counts its new value only.
	if err := m.SetWithin("p", "s", "a", json.RawMessage(`"1234567"`), 10); err != nil {
		t.Fatalf("replace: %v", err)
	}
}

func TestSessionEventsRideTheContext(t *testing.T) {
	if SessionEvents(context.Background()) != nil {
		t.Fatal("a bare context has a sink")
	}
	var got string
	ctx := WithSessionEvents(context.Background(), func(typ string, data json.RawMessage) error {
		got = typ + " " + string(data)
		return nil
	})
	if err := SessionEvents(ctx)("todo/write", json.RawMessage(`{}`)); err != nil || got != "todo/write {}" {
		t.Fatalf("sink: %v, %q", err, got)
	}
}
