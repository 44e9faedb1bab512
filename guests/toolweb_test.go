package guests

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/dsh-wasm/dsh-wasm/runtime/config"
)

// webServer serves the pages the web tests fetch, on loopback.
func webServer(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/page", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte(`<!doctype html><html><head><title>T</title><script>alert("x")</script><style>p{}</style></head><body>
<h1>Release notes</h1><p>Version <b>2.0</b> adds <a href="/docs">docs</a>.</p>
<ul><li>fast</li><li>small</li></ul>
<table><tr><th>name</th><th>size</th></tr><tr><td>a</td><td>1</td></tr></table></body></html>`))
	})
	mux.HandleFunc("/deep", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(strings.Repeat("<div>", 600) + "deep" + strings.Repeat("</div>", 600)))
	})
	mux.HandleFunc("/plain", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte("just text\n"))
	})
	mux.HandleFunc("/long", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte(strings.Repeat("0123456789", 1000)))
	})
	mux.HandleFunc("/image", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"))
	})
	mux.HandleFunc("/octets", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write([]byte{0, 1, 2, 0xff})
	})
	mux.HandleFunc("/missing", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no such page", http.StatusNotFound)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	port := srv.Listener.Addr().(interface{ String() string }).String()
	_, p, _ := strings.Cut(port, ":")
	// A redirect to localhost: the same server under a name the grant
	// does not list.
	mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://localhost:"+p+"/plain", http.StatusFound)
	})
	mux.HandleFunc("/hop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/plain", http.StatusFound)
	})
	return srv
}

func TestToolWebFetch(t *testing.T) {
	srv := webServer(t)
	u, _ := url.Parse(srv.URL)
	g := config.Grants{Net: config.NetGrant{AllowedHosts: []string{u.Hostname()}, ResponseBytes: 4000}}
	e := loadTool(t, "tool-web", g, `{"max_output_bytes":2000}`, 0)

	got := e.ok(t, "web_fetch", jsonArgs("url", srv.URL+"/page", "prompt", "what is new"))
	for _, want := range []string{
		"URL: " + srv.URL + "/page\nContent-Type: text/html\nLooking for: what is new\n\n",
		"# Release notes", "Version **2.0** adds [docs](" + srv.URL + "/docs).", "- fast\n- small",
		"| name | size |", "| a    | 1    |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("HTML to Markdown lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "alert") || strings.Contains(got, "p{}") || strings.Contains(got, "<") {
		t.Errorf("script, style or tags leaked:\n%s", got)
	}

	if got := e.ok(t, "web_fetch", jsonArgs("url", srv.URL+"/hop")); got != "URL: "+srv.URL+"/plain\nContent-Type: text/plain\n\njust text\n" {
		t.Errorf("redirect on a listed host: %q", got)
	}
	e.fails(t, "web_fetch", jsonArgs("url", srv.URL+"/away"), "refused by the host", "localhost")
	// Nesting the HTML parser refuses comes back as it is, said so.
	got = e.ok(t, "web_fetch", jsonArgs("url", srv.URL+"/deep"))
	if !strings.HasPrefix(got, "URL: "+srv.URL+"/deep\nContent-Type: text/html\n[could not convert the HTML to Markdown (") || !strings.Contains(got, "showing it as it is]\n\n<div><div><div>") {
		t.Errorf("deep HTML:\n%.300s", got)
	}
	e.fails(t, "web_fetch", jsonArgs("url", srv.URL+"/image"), "image/png", "not text")
	e.fails(t, "web_fetch", jsonArgs("url", srv.URL+"/octets"), "application/octet-stream", "not text")
	e.fails(t, "web_fetch", jsonArgs("url", srv.URL+"/missing"), "HTTP 404", "no such page")
	e.fails(t, "web_fetch", jsonArgs("url", "file:///etc/passwd"), "only http and https")
	e.fails(t, "web_fetch", jsonArgs("url", "http://example.com/"), "refused by the host")

	// The host caps the body at 4000 bytes; the tool cuts its result at
	// 2000 and says so.
	got = e.ok(t, "web_fetch", jsonArgs("url", srv.URL+"/long"))
	body := strings.Repeat("0123456789", 200)
	if got != "URL: "+srv.URL+"/long\nContent-Type: text/plain\n\n"+body+"\n\n[content truncated: showing the first 2000 bytes; fetch a more specific page for the rest]" {
		t.Errorf("capped body:\n%s", got)
	}
	e2 := loadTool(t, "tool-web", g, "", 0)
	got = e2.ok(t, "web_fetch", jsonArgs("url", srv.URL+"/long"))
	if !strings.HasSuffix(got, strings.Repeat("0123456789", 400)+"\n\n[content truncated: the page is longer than the host's response limit]") {
		t.Errorf("host-capped body:\n%s", got)
	}
}

func TestToolWebNeedsNetGrant(t *testing.T) {
	e := loadTool(t, "tool-web", config.Grants{}, "", 0)
	e.fails(t, "web_fetch", jsonArgs("url", "http://127.0.0.1:1/"), "not granted network access")
}
