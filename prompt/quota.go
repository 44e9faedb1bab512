package prompt

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrPromptQuota: an assembly's text passed its byte quota, the whole
// prompt's or one owner's. A *QuotaError wraps it.
var ErrPromptQuota = errors.New("prompt quota exceeded")

// QuotaError reports the quota an assembly's text passed.
type QuotaError struct {
	// Owner is who added the text ("" for the static sections, or a
	// plugin's name); Quota names the quota passed.
	Owner, Quota string
	Limit, Want  int64
}

func (e *QuotaError) Error() string {
	who := "static sections"
	if e.Owner != "" {
		who = fmt.Sprintf("%q", e.Owner)
	}
	return fmt.Sprintf("%v: %s would bring the prompt past its %s of %d bytes (%d bytes asked)", ErrPromptQuota, who, e.Quota, e.Limit, e.Want)
}

func (e *QuotaError) Unwrap() error { return ErrPromptQuota }

// Quota counts the bytes of text one assembly takes in: the whole prompt's
// (Limit) and each owner's, for owners with their own quota (a plugin's
// prompt_bytes). Text is charged as it arrives, and a provider that can
// asks Remaining before it even copies text, so an assembly never holds
// much more than its quota. It is safe for concurrent use.
type Quota struct {
	limit int64

	mu     sync.Mutex
	used   int64
	owners map[string]int64
}

// NewQuota returns a quota of limit bytes for one assembly (<= 0: none).
func NewQuota(limit int64) *Quota { return &Quota{limit: limit, owners: map[string]int64{}} }

// Limit is the whole-prompt quota (0: none).
func (q *Quota) Limit() int64 {
	if q == nil || q.limit <= 0 {
		return 0
	}
	return q.limit
}

// Used is what the assembly has taken in so far.
func (q *Quota) Used() int64 {
	if q == nil {
		return 0
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.used
}

// Remaining is how many more bytes owner may add: what is left of the
// whole prompt's quota and of ownerLimit (<= 0: no own quota) less what
// owner has added. A nil Quota leaves only ownerLimit.
func (q *Quota) Remaining(owner string, ownerLimit int64) int64 {
	left := int64(1) << 62
	if ownerLimit > 0 {
		left = ownerLimit
	}
	if q == nil {
		return left
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if ownerLimit > 0 {
		left -= q.owners[owner]
	}
	if q.limit > 0 {
		left = min(left, q.limit-q.used)
	}
	return max(left, 0)
}

// Charge adds n bytes from owner, or refuses them (a *QuotaError) when
// they would pass the whole prompt's quota or owner's (ownerLimit, <= 0
// for none; quota names it in the error).
func (q *Quota) Charge(owner string, ownerLimit, n int64, quota string) error {
	if q == nil {
		if ownerLimit > 0 && n > ownerLimit {
			return &QuotaError{Owner: owner, Quota: quota, Limit: ownerLimit, Want: n}
		}
		return nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if ownerLimit > 0 && q.owners[owner]+n > ownerLimit {
		return &QuotaError{Owner: owner, Quota: quota, Limit: ownerLimit, Want: n}
	}
	if q.limit > 0 && q.used+n > q.limit {
		return &QuotaError{Owner: owner, Quota: "whole-prompt quota", Limit: q.limit, Want: n}
	}
	q.used += n
	if ownerLimit > 0 {
		q.owners[owner] += n
	}
	return nil
}

type quotaKey struct{}

// WithQuota returns ctx carrying q: Assemble charges static sections to
// it, and providers that know their owner charge their text before they
// return it.
func WithQuota(ctx context.Context, q *Quota) context.Context {
	return context.WithValue(ctx, quotaKey{}, q)
}

// QuotaFrom returns the Quota on ctx, or nil.
func QuotaFrom(ctx context.Context) *Quota {
	q, _ := ctx.Value(quotaKey{}).(*Quota)
	return q
}
