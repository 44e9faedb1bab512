package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-wasm/dsh-wasm/runtime/config"
)

// nofileEnv asks the test binary (TestMain) to set its descriptor limit
// to the value, then exec its arguments: a child under that limit.
const nofileEnv = "DSH_TEST_EXEC_NOFILE"

func execUnderNofile() int {
	n, err := strconv.ParseUint(os.Getenv(nofileEnv), 10, 64)
	if err != nil || len(os.Args) < 2 {
		fmt.Fprintf(os.Stderr, "%s=%q: want a number and a command\n", nofileEnv, os.Getenv(nofileEnv))
		return 2
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: n, Max: n}); err != nil {
		fmt.Fprintln(os.Stderr, "setrlimit:", err)
		return 1
	}
	env := make([]string, 0, len(os.Environ()))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, nofileEnv+"=") {
			env = append(env, kv)
		}
	}
	err = syscall.Exec(os.Args[1], os.Args[1:], env)
	fmt.Fprintln(os.Stderr, "exec:", err)
	return 1
}

// nofileOf reads a process's soft descriptor limit from /proc.
func nofileOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 4 && strings.HasPrefix(line, "Max open files") {
			n, _ := strconv.Atoi(f[3])
			return n
		}
	}
	t.Fatalf("no open-files limit in %s", b)
	return 0
}

// raiseNofile makes room for the test's own 1,000 client sockets, or
// skips.
func raiseNofile(t *testing.T) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur < 1200 {
		lim.Cur = min(lim.Max, 1200)
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur < 1200 {
			t.Skipf("this test needs 1,200 descriptors for its clients; the limit is %d (%v)", lim.Cur, err)
		}
	}
}

// floodThenAsk opens 1,000 connections to addr that each send one GET
// and then say nothing, then asks url as a new client and fails unless
// it gets want within a second. It returns how long the answer took.
func floodThenAsk(t *testing.T, addr, url string, want int) time.Duration {
	t.Helper()
	silent := make([]net.Conn, 0, 1000)
	defer func() {
		for _, c := range silent {
			c.Close()
		}
	}()
	for range 1000 {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("connection %d: %v", len(silent), err)
		}
		silent = append(silent, c)
		if _, err := c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: " + addr + "\r\n\r\n")); err != nil {
			t.Fatalf("connection %d: %v", len(silent), err)
		}
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	asked := time.Now()
	resp, err := client.Get(url)
	took := time.Since(asked)
	if err != nil {
		t.Fatalf("a new client's GET after 1,000 silent connections: %v (after %v)", err, took)
	}
	resp.Body.Close()
	if resp.StatusCode != want || took > time.Second {
		t.Fatalf("a new client's GET: %d after %v, want %d within 1s", resp.StatusCode, took, want)
	}
	return took
}

// A worker whose descriptor limit is 256 gets 1,000 connections that each
// send one GET /healthz and then say nothing. A new client is still
// answered within a second (the cap closes the longest-idle connections),
// and an SSE turn that started before them, and lasts longer than every
// timeout, keeps getting its events.
func TestServeSilentConnections(t *testing.T) {
	raiseNofile(t)
	model := &scriptedModel{hung: make(chan string, 4)}
	ms := httptest.NewServer(model)
	defer ms.Close()
	const short = 300 * time.Millisecond
	const idle = 3 * time.Second
	cfgPath, env := serveSetup(t, ms.URL, false,
		fmt.Sprintf("http: {read_timeout: %v, write_timeout: %v, idle_timeout: %v}\n", short, short, idle))
	cmd := exec.Command(os.Args[0], binary(t), "serve", "--config", cfgPath, "--listen", "127.0.0.1:0")
	cmd.Env = append(env, nofileEnv+"=256")
	w := startWorkerCmd(t, cmd)
	if n := nofileOf(t, w.cmd.Process.Pid); n != 256 {
		t.Fatalf("the worker's descriptor limit is %d, want 256", n)
	}
	addr := strings.TrimPrefix(w.url, "http://")

	s := createSession(t, w, tokenAlpha, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	slow := promptTurn(t, ctx, w, tokenAlpha, s.ID, "slow")
	if slow.code != http.StatusOK {
		t.Fatalf("slow: %d %s", slow.code, slow.body)
	}
	<-model.hung

	took := floodThenAsk(t, addr, w.url+"/healthz", http.StatusOK)

	// The turn's stream outlasts the read, write and idle timeouts and
	// still gets its events (reasoning every 100ms).
	until := start.Add(idle + 2*short + time.Second)
	events := 0
	for time.Now().Before(until) {
		select {
		case _, ok := <-slow.events:
			if !ok {
				t.Fatalf("the SSE stream ended after %v and %d events", time.Since(start), events)
			}
			events++
		case <-time.After(5 * time.Second):
			t.Fatalf("no SSE event for 5s, %v into the stream", time.Since(start))
		}
	}
	t.Logf("%d events in %v; the new client was answered in %v", events, time.Since(start), took)
}

// serveBounded serves h on a loopback port through newHTTPServer.
func serveBounded(t *testing.T, h http.Handler, lim config.HTTP) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs, capped := newHTTPServer(ln, h, lim)
	go hs.Serve(capped)
	t.Cleanup(func() { hs.Close() })
	return "http://" + ln.Addr().String()
}

// A handler that reads its whole body, then answers for longer than the
// read and write timeouts, keeps its request's context and its
// connection: the read deadline bounds the request, the write deadline
// one write, neither the answer (the MCP server reads bodies to their
// end, then may run a tool for minutes).
func TestReadTimeoutBoundsOnlyTheRequest(t *testing.T) {
	const short = 200 * time.Millisecond
	url := serveBounded(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		for i := range 8 {
			select {
			case <-r.Context().Done():
				fmt.Fprintf(w, "cancelled after %d\n", i)
				return
			case <-time.After(short / 2):
			}
			fmt.Fprintf(w, "event %d\n", i)
			w.(http.Flusher).Flush()
		}
		fmt.Fprintln(w, "done")
	}), config.HTTP{ReadTimeout: short, WriteTimeout: short, IdleTimeout: time.Second})
	resp, err := http.Post(url, "text/plain", strings.NewReader("body"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || !strings.HasSuffix(string(b), "event 7\ndone\n") {
		t.Fatalf("answer %q, %v: want eight events and done", b, err)
	}
}

// A client that reads nothing of a stream is dropped once one write
// stalls for the write timeout: the handler's write fails, and the
// server ends the connection while the handler goes on (an SSE turn
// runs to its end).
func TestWriteTimeoutDropsAClientThatReadsNothing(t *testing.T) {
	failed := make(chan error, 1)
	release := make(chan struct{})
	defer close(release)
	url := serveBounded(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := []byte(strings.Repeat("x", 64<<10))
		for {
			if _, err := w.Write(chunk); err != nil {
				failed <- err
				<-release
				return
			}
		}
	}), config.HTTP{WriteTimeout: 300 * time.Millisecond})
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	select {
	case err := <-failed:
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Errorf("the write failed with %v, want a timeout", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a client that reads nothing held its handler for 30s")
	}
	// The handler still runs; the connection is closed all the same.
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, c); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("the connection stayed open while its handler ran")
		}
	}
}

// At the cap, a new connection closes the one idle the longest, not a
// newer one and not one with a request running; a connection still
// sending its headers is not running a request.
func TestConnectionCapClosesTheLongestIdle(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	url := serveBounded(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			<-release
		}
	}), config.HTTP{MaxConnections: 5, ReadTimeout: time.Minute, IdleTimeout: time.Minute})
	addr := strings.TrimPrefix(url, "http://")
	connect := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, bufio.NewReader(c)
	}
	get := func(path string) (net.Conn, *bufio.Reader) {
		c, br := connect()
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		if path != "/hold" {
			io.Copy(io.Discard, resp.Body)
		}
		return c, br
	}
	closed := func(c net.Conn, br *bufio.Reader) bool {
		c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		_, err := br.ReadByte()
		return errors.Is(err, io.EOF)
	}
	hold, holdBr := get("/hold") // a request running: never closed by the cap
	time.Sleep(20 * time.Millisecond)
	slow, slowBr := connect() // headers begun, never finished
	fmt.Fprintf(slow, "GET / HTTP/1.1\r\nHost: x\r\n")
	type conn struct {
		c  net.Conn
		br *bufio.Reader
	}
	var idle []conn
	for range 3 {
		time.Sleep(20 * time.Millisecond) // a distinct idle order
		c, br := get("/")
		idle = append(idle, conn{c, br})
	}
	get("/") // the sixth: the slow one goes, idle the longest
	if !closed(slow, slowBr) {
		t.Errorf("the connection sending its headers slowly, idle the longest, is still open")
	}
	get("/") // the seventh: the first idle one goes
	if !closed(idle[0].c, idle[0].br) {
		t.Errorf("the longest-idle connection is still open")
	}
	for i := 1; i < 3; i++ {
		if closed(idle[i].c, idle[i].br) {
			t.Errorf("idle connection %d was closed, not the longest-idle", i)
		}
	}
	hold.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := holdBr.ReadByte(); errors.Is(err, io.EOF) {
		t.Errorf("the connection with a request running was closed")
	}
}

// mcp --listen builds its server in the same place: under the same
// flood, with 256 descriptors, a new client is answered within a second.
func TestMCPListenSilentConnections(t *testing.T) {
	raiseNofile(t)
	e := newMCPEnv(t)
	cmd := exec.Command(os.Args[0], binary(t), "mcp", "--config", e.config, "--cwd", e.workspace, "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), nofileEnv+"=256")
	url := startHTTPCmd(t, cmd)
	if n := nofileOf(t, cmd.Process.Pid); n != 256 {
		t.Fatalf("the server's descriptor limit is %d, want 256", n)
	}
	addr := strings.TrimPrefix(strings.TrimSuffix(url, "/"), "http://")
	// Without a session the MCP handler answers a GET at once: 400.
	floodThenAsk(t, addr, url, http.StatusBadRequest)
}

// A handler that returns long after its last write still gets its
// buffered answer out: the deadline is renewed for the server's last
// flush, not left at the last write's.
func TestWriteDeadlineRenewedForTheLastFlush(t *testing.T) {
	const d = 200 * time.Millisecond
	url := serveBounded(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "buffered") // not flushed: the server sends it at the end
		time.Sleep(3 * d)
	}), config.HTTP{WriteTimeout: d})
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if b, err := io.ReadAll(resp.Body); err != nil || string(b) != "buffered" {
		t.Errorf("answer %q, %v", b, err)
	}
}
