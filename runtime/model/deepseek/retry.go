package deepseek

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dsh-wasm/dsh-wasm/runtime/model"
)

// failure is why an attempt did not start a stream.
type failure struct {
	err           error
	retryable     bool
	retryAfter    time.Duration
	hasRetryAfter bool
}

// connect sends body until a stream starts (its first byte has arrived),
// retrying what Options allow.
func (p *Provider) connect(ctx context.Context, body []byte) (*stream, error) {
	for attempt := 1; ; attempt++ {
		s, fail := p.attempt(ctx, body)
		if fail == nil {
			return s, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if !fail.retryable {
			return nil, fmt.Errorf("deepseek: %w", fail.err)
		}
		if attempt > p.opts.MaxRetries {
			if attempt == 1 {
				return nil, fmt.Errorf("deepseek: %w", fail.err)
			}
			return nil, fmt.Errorf("deepseek: giving up after %d attempts: %w", attempt, fail.err)
		}
		delay := p.backoff(attempt)
		if fail.hasRetryAfter {
			if fail.retryAfter > p.opts.MaxRetryAfter {
				return nil, fmt.Errorf("deepseek: the server asks to retry after %s, longer than the %s limit: %w",
					fail.retryAfter, p.opts.MaxRetryAfter, fail.err)
			}
			delay = fail.retryAfter
		}
		if err := p.opts.Sleep(ctx, delay); err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return nil, ctxErr
			}
			return nil, fmt.Errorf("deepseek: waiting to retry: %w", err)
		}
	}
}

// attempt sends the request once and waits for the first byte of a
// successful response.
func (p *Provider) attempt(ctx context.Context, body []byte) (*stream, *failure) {
	actx, cancel := context.WithCancelCause(ctx)
	req, err := http.NewRequestWithContext(actx, http.MethodPost, p.endpoint, bytes.NewReader(body))
	if err != nil {
		cancel(nil)
		return nil, &failure{err: fmt.Errorf("building request: %w", err)}
	}
	req.Header.Set("Authorization", "Bearer "+p.apiKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")

	headerTimeout := fmt.Errorf("no response within %s", p.opts.HeaderTimeout)
	timer := time.AfterFunc(p.opts.HeaderTimeout, func() { cancel(headerTimeout) })
	resp, err := p.client.Do(req)
	if err != nil {
		timer.Stop()
		if context.Cause(actx) == headerTimeout {
			err = headerTimeout
		}
		cancel(nil)
		return nil, &failure{err: fmt.Errorf("sending request: %w", err), retryable: true}
	}
	if resp.StatusCode/100 != 2 {
		apiErr := readAPIError(resp)
		timer.Stop()
		cancel(nil)
		f := &failure{err: apiErr}
		if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
			f.retryable = true
			f.retryAfter, f.hasRetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), p.opts.Now())
		}
		return nil, f
	}

	s := &stream{actx: actx, cancel: cancel, body: resp.Body}
	s.r = bufio.NewReaderSize(idleReader{s}, 64<<10)
	_, err = s.r.Peek(1)
	if !timer.Stop() && context.Cause(actx) == headerTimeout {
		err = headerTimeout
	}
	if err != nil {
		s.close()
		if errors.Is(err, io.EOF) {
			return nil, &failure{err: fmt.Errorf("%w: the response body was empty", model.ErrStreamCut), retryable: true}
		}
		return nil, &failure{err: fmt.Errorf("%w: before the first byte: %w", model.ErrStreamCut, err), retryable: true}
	}
	s.idleTimeout = fmt.Errorf("no data for %s", p.opts.IdleTimeout)
	s.idleLimit = p.opts.IdleTimeout
	s.idle = time.AfterFunc(p.opts.IdleTimeout, func() { cancel(s.idleTimeout) })
	return s, nil
}

// backoff is the jittered exponential delay before retry number attempt
// (1-based): uniform in [d/2, d] with d = base·2^(attempt-1), capped.
func (p *Provider) backoff(attempt int) time.Duration {
	d := p.opts.RetryBaseDelay
	for i := 1; i < attempt && d < p.opts.RetryMaxDelay; i++ {
		d *= 2
	}
	d = min(d, p.opts.RetryMaxDelay)
	half := d / 2
	return half + rand.N(d-half+1)
}

// parseRetryAfter reads a Retry-After value: delay seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if strings.Trim(v, "0123456789.") == "" && strings.Count(v, ".") <= 1 && v != "." {
		secs, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, false
		}
		if secs >= float64(math.MaxInt64/int64(time.Second)) {
			return time.Duration(math.MaxInt64), true
		}
		return time.Duration(secs * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 64 << 10

// readAPIError turns a failed response into an APIError and closes it.
func readAPIError(resp *http.Response) *model.APIError {
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	e := &model.APIError{Status: resp.StatusCode}
	var payload struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(data, &payload) == nil {
		var detail errorDetail
		if len(payload.Error) > 0 && json.Unmarshal(payload.Error, &detail) == nil {
			e.Message, e.Code = detail.Message, detail.code()
		} else if len(payload.Error) > 0 {
			var s string
			if json.Unmarshal(payload.Error, &s) == nil {
				e.Message = s
			}
		}
		if e.Message == "" {
			e.Message = payload.Message
		}
	}
	if e.Message == "" {
		e.Message = excerpt(bytes.TrimSpace(data), 512)
	}
	if e.Message == "" {
		e.Message = http.StatusText(resp.StatusCode)
	}
	return e
}

// errorDetail is the OpenAI-style error object.
type errorDetail struct {
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
}

// code is the error's code (a string or a number), or else its type.
func (d errorDetail) code() string {
	var s string
	if json.Unmarshal(d.Code, &s) == nil && s != "" {
		return s
	}
	var n json.Number
	if json.Unmarshal(d.Code, &n) == nil && n != "" {
		return n.String()
	}
	return d.Type
}

// excerpt quotes at most limit bytes of b, cut on a rune boundary.
func excerpt(b []byte, limit int) string {
	if len(b) <= limit {
		return string(b)
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return string(b[:cut]) + "…"
}
