package plugin

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/dsh-wasm/dsh-wasm/internal/sandbox/workdir"
)

// workdirs holds the opened working directory of each agent that has
// one bound: the `workspace` root of its jails and commands.
type workdirs struct {
	mu   sync.Mutex
	dirs map[string]*workdir.Dir // by agent id
}

// BindWorkdir makes the directory dir, opened by the caller and shown as
// name (the agent's cwd), the agent's working directory until the
// returned unbind is called: every jail and command of the agent's
// instances reaches its `workspace` grant through this directory, never
// through name. The host takes its own handle on dir; the caller may
// close dir once BindWorkdir returns. An agent with a cwd and no bound
// directory has its cwd opened as a path when an instance is made.
func (h *Host) BindWorkdir(agentID, name string, dir *os.Root) (unbind func(), err error) {
	if agentID == "" {
		return nil, errors.New("plugin: bind workdir: empty agent id")
	}
	d, err := workdir.FromRoot(name, dir)
	if err != nil {
		return nil, fmt.Errorf("plugin: bind workdir of agent %s: %w", agentID, err)
	}
	h.workdirs.mu.Lock()
	if h.workdirs.dirs == nil {
		h.workdirs.dirs = map[string]*workdir.Dir{}
	}
	if _, dup := h.workdirs.dirs[agentID]; dup {
		h.workdirs.mu.Unlock()
		d.Close()
		return nil, fmt.Errorf("plugin: bind workdir: agent %s already has one", agentID)
	}
	h.workdirs.dirs[agentID] = d
	h.workdirs.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			h.workdirs.mu.Lock()
			if h.workdirs.dirs[agentID] == d {
				delete(h.workdirs.dirs, agentID)
			}
			h.workdirs.mu.Unlock()
			d.Close()
		})
	}, nil
}

// workdir returns the directory bound to the agent, or nil.
func (w *workdirs) get(agentID string) *workdir.Dir {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.dirs[agentID]
}
