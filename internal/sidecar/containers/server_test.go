package containers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCreateRefusals(t *testing.T) {
	h := newHarness(t, Options{Image: "example/app:1"})
	for _, tc := range []struct {
		name, body string
		want       int
		message    string
	}{
		{"mounts", `{"Image":"example/app:1","HostConfig":{"Mounts":[{"Type":"volume"}]}}`, 400, "Mounts"},
		{"binds", `{"Image":"example/app:1","HostConfig":{"Binds":["/:/host"]}}`, 400, "Binds"},
		{"capadd", `{"Image":"example/app:1","HostConfig":{"CapAdd":["SYS_ADMIN"]}}`, 400, "CapAdd"},
		{"devices", `{"Image":"example/app:1","HostConfig":{"Devices":[{"PathOnHost":"/dev/kvm"}]}}`, 400, "Devices"},
		{"securityopt", `{"Image":"example/app:1","HostConfig":{"SecurityOpt":["seccomp=unconfined"]}}`, 400, "SecurityOpt"},
		{"privileged", `{"Image":"example/app:1","HostConfig":{"Privileged":true}}`, 400, "Privileged"},
		{"two at once", `{"Image":"example/app:1","HostConfig":{"Privileged":true,"CapAdd":["X"]}}`, 400, "CapAdd, Privileged"},
		{"other image", `{"Image":"evil/miner:1"}`, 404, "No such image: evil/miner:1"},
		{"no image", `{}`, 400, "no Image"},
		{"not json", `{`, 400, "decoding"},
		{"pidmode host is ignored", `{"Image":"example/app:1","HostConfig":{"PidMode":"host"}}`, 201, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "workerd-k-" + strings.ReplaceAll(tc.name, " ", "")
			r := h.docker("POST", "/containers/create?name="+name, tc.body)
			if r.status != tc.want {
				t.Fatalf("%d %s, want %d", r.status, r.body, tc.want)
			}
			if tc.message != "" && !strings.Contains(r.message(t), tc.message) {
				t.Errorf("message %q, want it to name %q", r.message(t), tc.message)
			}
		})
	}
	// The proxy's own CapAdd NET_ADMIN is fine: it never runs.
	if r := h.docker("POST", "/containers/create?name="+testProxy, proxyBody); r.status != 201 {
		t.Errorf("proxy create: %d %s", r.status, r.body)
	}
	if r := h.docker("POST", "/containers/create", `{"Image":"example/app:1"}`); r.status != 400 {
		t.Errorf("create without a name: %d %s", r.status, r.body)
	}
}

func TestKillSignals(t *testing.T) {
	for _, tc := range []struct {
		signal string
		want   int
		grace  time.Duration
	}{
		{"SIGTERM", 204, stopGrace},
		{"TERM", 204, stopGrace},
		{"15", 204, stopGrace},
		{"SIGINT", 204, stopGrace},
		{"2", 204, stopGrace},
		{"SIGKILL", 204, 0},
		{"9", 204, 0},
		{"", 204, 0},
		{"SIGHUP", 400, 0},
		{"SIGUSR1", 400, 0},
		{"10", 400, 0},
	} {
		t.Run("signal="+tc.signal, func(t *testing.T) {
			h := newHarness(t, Options{})
			h.runningApp()
			r := h.docker("POST", "/containers/"+testApp+"/kill?signal="+tc.signal, "")
			if r.status != tc.want {
				t.Fatalf("%d %s, want %d", r.status, r.body, tc.want)
			}
			_, stops, _ := h.b.snapshot()
			if tc.want != 204 {
				if len(stops) != 0 || !strings.Contains(r.message(t), "SIGTERM") {
					t.Errorf("stops %v, message %q", stops, r.message(t))
				}
				return
			}
			if len(stops) != 1 || stops[0] != (stopCall{testApp, tc.grace}) {
				t.Fatalf("Backend.Stop calls %v, want one with grace %v", stops, tc.grace)
			}
			// The fake exits at once; the record stays as exited and kill is 409.
			r = h.docker("POST", "/containers/"+testApp+"/wait", "")
			var wr waitResponse
			r.json(t, &wr)
			if wr.StatusCode != 143 && wr.StatusCode != 137 {
				t.Errorf("wait after kill: %s", r.body)
			}
			if r := h.docker("POST", "/containers/"+testApp+"/kill?signal=SIGTERM", ""); r.status != 409 {
				t.Errorf("kill of an exited container: %d %s, want 409", r.status, r.body)
			}
		})
	}
}

// TestRestart is workerd's start after an exit: create → 409 → DELETE →
// wait?condition=removed → create → start.
func TestRestart(t *testing.T) {
	h := newHarness(t, Options{})
	h.runningApp()
	h.b.exit(testApp, 0)
	r := h.docker("POST", "/containers/"+testApp+"/wait", "")
	if r.status != 200 || !strings.Contains(string(r.body), `"StatusCode":0`) {
		t.Fatalf("wait: %d %s", r.status, r.body)
	}
	var in inspectResponse
	h.docker("GET", "/containers/"+testApp+"/json", "").json(t, &in)
	if in.State.Status != "exited" || in.State.Running {
		t.Fatalf("inspect after exit: %+v", in.State)
	}
	steps := []struct {
		method, target, body string
		want                 int
	}{
		{"PUT egress", "", "", 200},
		{"POST", "/containers/create?name=" + testApp, appBody, 409},
		{"POST", "/containers/" + testApp + "/start", "", 409},
		{"DELETE", "/containers/" + testApp + "?force=true", "", 204},
		{"POST", "/containers/" + testApp + "/wait?condition=removed", "", 404},
		{"GET", "/containers/" + testApp + "/json", "", 404},
		{"POST", "/containers/create?name=" + testApp, appBody, 201},
		{"POST", "/containers/" + testApp + "/start", "", 204},
		{"POST", "/containers/" + testApp + "/start", "", 304},
	}
	for _, s := range steps {
		var r reply
		if s.method == "PUT egress" {
			body := `{"port":36819,"dns":{"allowHostnames":[]},"internet":{"enabled":true}}`
			r = raw(t, "tcp", "127.0.0.1:"+h.proxyPort(testProxy), "PUT", "/egress",
				map[string]string{"host": "localhost", "content-type": "application/json", "content-length": fmt.Sprint(len(body))}, body)
		} else {
			r = h.docker(s.method, s.target, s.body)
		}
		if r.status != s.want {
			t.Fatalf("%s %s: %d %s, want %d", s.method, s.target, r.status, r.body, s.want)
		}
	}
	started, _, removed := h.b.snapshot()
	if len(started) != 2 || started[0].Internet || !started[1].Internet {
		t.Errorf("starts %+v: want two, the second with Internet from the last PUT /egress", started)
	}
	if len(removed) != 1 || removed[0] != testApp {
		t.Errorf("Backend.Remove calls %v", removed)
	}
}

// TestWaitRemoved: wait?condition=removed blocks until another request removes it,
// and a plain wait on a running container gets the forced removal's exit code.
func TestWaitRemoved(t *testing.T) {
	h := newHarness(t, Options{})
	h.runningApp()
	removed, exited := make(chan reply, 1), make(chan reply, 1)
	go func() { removed <- h.docker("POST", "/containers/"+testApp+"/wait?condition=removed", "") }()
	go func() { exited <- h.docker("POST", "/containers/"+testApp+"/wait?condition=not-running", "") }()
	time.Sleep(100 * time.Millisecond)
	select {
	case r := <-removed:
		t.Fatalf("wait?condition=removed answered %d before DELETE", r.status)
	default:
	}
	if r := h.docker("DELETE", "/containers/"+testApp, ""); r.status != 409 {
		t.Fatalf("DELETE of a running container without force: %d, want 409", r.status)
	}
	if r := h.docker("DELETE", "/containers/"+testApp+"?force=true", ""); r.status != 204 {
		t.Fatalf("DELETE: %d %s", r.status, r.body)
	}
	if r := <-removed; r.status != 200 {
		t.Errorf("wait?condition=removed: %d %s", r.status, r.body)
	}
	if r := <-exited; r.status != 200 || !strings.Contains(string(r.body), `"StatusCode":137`) {
		t.Errorf("plain wait: %d %s", r.status, r.body)
	}
	for _, target := range []string{"/containers/nope/wait?condition=removed", "/containers/nope/wait", "/containers/nope/kill?signal=SIGTERM", "/containers/nope/start"} {
		if r := h.docker("POST", target, ""); r.status != 404 {
			t.Errorf("POST %s: %d, want 404", target, r.status)
		}
	}
	if r := h.docker("DELETE", "/containers/nope?force=true", ""); r.status != 404 {
		t.Errorf("DELETE unknown: %d, want 404", r.status)
	}
	if r := h.docker("POST", "/containers/"+testApp+"/wait?condition=next-exit", ""); r.status != 400 {
		t.Errorf("condition=next-exit: %d, want 400", r.status)
	}
}

// TestProxy: CONNECT before the app runs and to a closed port is 400 (workerd:
// "not listening"), a tunnel passes half-closes on, and DELETE of the proxy closes
// its listener and its tunnels.
func TestProxy(t *testing.T) {
	h := newHarness(t, Options{})
	for _, step := range []struct{ target, body string }{
		{"/containers/create?name=" + testProxy, proxyBody}, {"/containers/" + testProxy + "/start", ""},
	} {
		h.docker("POST", step.target, step.body)
	}
	proxyAddr := "127.0.0.1:" + h.proxyPort(testProxy)
	echo := startEcho(t)
	_, echoPort, _ := net.SplitHostPort(echo)
	connect := func(dst string) (net.Conn, int) {
		conn, err := net.Dial("tcp", proxyAddr)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nx-dst-addr: %s\r\n\r\n", dst, dst)
		// Read the answer byte by byte so that nothing of the tunnel is consumed.
		var head []byte
		for !strings.HasSuffix(string(head), "\r\n\r\n") {
			b := make([]byte, 1)
			if _, err := conn.Read(b); err != nil {
				t.Fatalf("CONNECT %s: %v after %q", dst, err, head)
			}
			head = append(head, b...)
		}
		var code int
		fmt.Sscanf(string(head[9:12]), "%d", &code)
		return conn, code
	}
	if c, code := connect("127.0.0.1:" + echoPort); code != 400 {
		t.Errorf("CONNECT before the app exists: %d, want 400", code)
		c.Close()
	}
	h.docker("POST", "/containers/create?name="+testApp, appBody)
	h.docker("POST", "/containers/"+testApp+"/start", "")
	if _, code := connect("127.0.0.1:" + freePort(t)); code != 400 {
		t.Errorf("CONNECT to a closed port: %d, want 400", code)
	}
	if _, code := connect("10.0.0.1:" + echoPort); code != 400 {
		t.Errorf("CONNECT to a non-loopback address: %d, want 400", code)
	}
	conn, code := connect("127.0.0.1:" + echoPort)
	if code != 200 {
		t.Fatalf("CONNECT: %d", code)
	}
	checkEcho(t, conn)

	tunnel, _ := connect("127.0.0.1:" + echoPort)
	if r := h.docker("DELETE", "/containers/"+testProxy+"?force=true", ""); r.status != 204 {
		t.Fatalf("DELETE proxy: %d", r.status)
	}
	if c, err := net.DialTimeout("tcp", proxyAddr, time.Second); err == nil {
		c.Close()
		t.Errorf("the proxy's listener is still open after DELETE")
	}
	if _, err := tunnel.Read(make([]byte, 64)); err == nil {
		t.Errorf("a tunnel survived the DELETE of its proxy")
	}
}

// startEcho serves a TCP echo that answers only once the client half-closed, so a
// reply proves the half-close went through.
func startEcho(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var got []byte
				buf := make([]byte, 1024)
				for {
					n, err := c.Read(buf)
					got = append(got, buf[:n]...)
					if err != nil {
						break
					}
				}
				_, _ = c.Write(append([]byte("echo:"), got...))
			}()
		}
	}()
	return l.Addr().String()
}

func checkEcho(t *testing.T, conn net.Conn) {
	t.Helper()
	defer conn.Close()
	fmt.Fprint(conn, "ping")
	if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	var got []byte
	buf := make([]byte, 64)
	for {
		n, err := conn.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			break
		}
	}
	if string(got) != "echo:ping" {
		t.Errorf("through the tunnel: %q, want %q", got, "echo:ping")
	}
}

func TestUnsupportedAndVersionPrefix(t *testing.T) {
	h := newHarness(t, Options{})
	for _, tc := range []struct {
		method, target string
		want           int
	}{
		{"GET", "/v1.43/volumes", 200},
		{"GET", "/v1.47/networks/bridge", 200},
		{"GET", "/v1.43/containers/nope/json", 404},
		{"GET", "/_ping", 501},
		{"GET", "/images/foo/json", 501},
		{"POST", "/images/create?fromImage=foo", 501},
		{"POST", "/containers/x/exec", 501},
		{"PUT", "/containers/x/archive?path=/etc", 501},
		{"POST", "/commit?container=x", 501},
		{"POST", "/volumes/create", 501},
		{"GET", "/networks/host", 501},
	} {
		r := h.docker(tc.method, tc.target, "")
		if r.status != tc.want {
			t.Errorf("%s %s: %d %s, want %d", tc.method, tc.target, r.status, r.body, tc.want)
		}
		if tc.want == 501 && !strings.Contains(r.message(t), "not supported by workerd-operator (docs/containers.md)") {
			t.Errorf("%s %s: message %q", tc.method, tc.target, r.message(t))
		}
	}
}

// TestStartFailure: a failed Backend.Start is a 500 on /start, and the container then
// reads as exited with a non-zero code, so monitor() rejects instead of hanging.
func TestStartFailure(t *testing.T) {
	h := newHarness(t, Options{})
	h.b.startErr = errors.New("image pull failed")
	h.docker("POST", "/containers/create?name="+testApp, appBody)
	r := h.docker("POST", "/containers/"+testApp+"/start", "")
	if r.status != 500 || !strings.Contains(r.message(t), "image pull failed") {
		t.Fatalf("start: %d %s", r.status, r.body)
	}
	r = h.docker("POST", "/containers/"+testApp+"/wait", "")
	if r.status != 200 || !strings.Contains(string(r.body), `"StatusCode":128`) {
		t.Fatalf("wait: %d %s", r.status, r.body)
	}
	if r := h.docker("DELETE", "/containers/"+testApp+"?force=true", ""); r.status != 204 {
		t.Fatalf("DELETE: %d", r.status)
	}
}

// A socket path longer than sockaddr_un holds (a pod's volume under a deep directory,
// as the local cluster's are) is still served at that path.
func TestListenUnixLongPath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "docker.sock")
	l, err := ListenUnix(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		_ = http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }))
	}()
	// workerd connects by a short path relative to its working directory; here, through
	// the directory's descriptor.
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", fmt.Sprintf("/proc/self/fd/%d/docker.sock", d.Fd()))
	}}}
	if len(path) < maxSocketPath {
		t.Fatalf("path %d bytes: the test needs one over %d", len(path), maxSocketPath)
	}
	resp, err := c.Get("http://localhost/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "ok" {
		t.Fatalf("got %q", b)
	}
}
