package dsh

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/internal/sandbox/netguard"
)

// hostHTTPRequest implements http_request through the plugin's net grant.
func hostHTTPRequest(h Host, req []byte) ([]byte, hostfns.Status, string) {
	var r hostfns.HTTPRequest
	if st, msg := Decode(req, &r); st != 0 {
		return nil, st, msg
	}
	f := h.Net()
	if f == nil {
		return nil, hostfns.ErrDenied, fmt.Sprintf("plugin %q is not granted network access (grants.net.allowed_hosts)", h.Name())
	}
	// grants.net.timeout bounds the request, so its wait is left out of
	// the compute budget (not the wall-clock cap).
	ctx := h.BoundedWait()
	resp, err := f.Fetch(ctx, netguard.Request{Method: r.Method, URL: r.URL, Headers: r.Headers, Body: r.Body, BodyBase64: r.BodyBase64})
	h.EndBoundedWait()
	if err != nil {
		switch {
		case errors.Is(err, netguard.ErrHostNotAllowed), errors.Is(err, netguard.ErrSchemeNotAllowed),
			errors.Is(err, netguard.ErrPrivateAddress):
			return nil, hostfns.ErrDenied, err.Error()
		case errors.Is(err, netguard.ErrTooManyRedirects):
			return nil, hostfns.ErrLimit, err.Error()
		case errors.Is(err, netguard.ErrInvalidRequest):
			return nil, hostfns.ErrBadJSON, err.Error()
		case errors.Is(err, netguard.ErrRequestTooLarge):
			return nil, hostfns.ErrTooLarge, err.Error()
		case errors.Is(err, context.Canceled):
			return nil, hostfns.ErrCanceled, err.Error()
		case errors.Is(err, context.DeadlineExceeded):
			return nil, hostfns.ErrTimeout, err.Error()
		}
		return nil, hostfns.ErrInternal, err.Error()
	}
	b, _ := json.Marshal(hostfns.HTTPResponse{Status: resp.Status, URL: resp.URL, Headers: resp.Headers,
		Body: resp.Body, BodyBase64: resp.BodyBase64, Truncated: resp.Truncated})
	return b, 0, ""
}
