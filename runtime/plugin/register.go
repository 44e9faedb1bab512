package plugin

import (
	"errors"
	"fmt"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/prompt"
)

func registrationStatus(err error, plugin string, max int) (hostfns.Status, string) {
	var re *prompt.RegistrationError
	switch {
	case errors.As(err, &re):
		return hostfns.ErrRule, err.Error()
	case errors.Is(err, errLimit):
		return hostfns.ErrLimit, fmt.Sprintf("plugin %q reached its limit of %d registrations", plugin, max)
	case errors.Is(err, errQuota):
		return hostfns.ErrTooLarge, err.Error()
	case errors.Is(err, errRemoved):
		return hostfns.ErrDenied, err.Error()
	case errors.Is(err, ErrUnresolvedReference):
		return hostfns.ErrRule, err.Error()
	}
	return hostfns.ErrInternal, err.Error()
}

// register adds one registration under the plugin's limits. It is the
// one way into the registry for everything a plugin registers, whatever
// its ABI (dsh:host/v1's host functions, a community plugin's tool list),
// and the one place its prompt text is measured and charged.
func (c *contrib) register(cs *callState, r *reg) ([]byte, hostfns.Status, string) {
	err := c.withTx(cs, func(tx *prompt.Tx) error {
		if c.count() >= c.p.limits.MaxRegistrations {
			return errLimit
		}
		size := r.promptBytes()
		if lim := c.p.limits.PromptBytes; size > 0 && c.static+size > lim {
			return fmt.Errorf("%w: plugin %q holds %d bytes of prompt text; %s %q would add %d, past grants.limits.prompt_bytes (%d)",
				errQuota, c.p.name, c.static, r.kind, r.name, size, lim)
		}
		d, err := r.add(tx, c.p.name)
		if err != nil {
			return err
		}
		r.d = d
		c.regs = append(c.regs, r)
		c.static += size
		return nil
	})
	if err != nil {
		st, msg := registrationStatus(err, c.p.name, c.p.limits.MaxRegistrations)
		return nil, st, msg
	}
	return nil, 0, ""
}
