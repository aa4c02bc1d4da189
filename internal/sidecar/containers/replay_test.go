package containers

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// recorded is one line of testdata/workerd-requests.log: what the pinned workerd sent
// to a logging fake Docker daemon (DOCKER) and to the -proxy's published port
// (INGRESS) for ctx.container start → getTcpPort(8080).fetch → getTcpPort(9999).fetch.
type recorded struct {
	to, method, target string
	hdrs               map[string]string
	body               string
}

var recordedLine = regexp.MustCompile(`^(DOCKER|INGRESS) (\S+) (\S+) HTTP/1\.1 hdrs=(\{.*?\}) body=(.*)$`)

func readRecorded(t *testing.T) []recorded {
	t.Helper()
	b, err := os.ReadFile("testdata/workerd-requests.log")
	if err != nil {
		t.Fatal(err)
	}
	var out []recorded
	for _, line := range strings.Split(string(b), "\n") {
		m := recordedLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		r := recorded{to: m[1], method: m[2], target: m[3], body: m[5]}
		if err := json.Unmarshal([]byte(m[4]), &r.hdrs); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

// TestRecordedSequence replays workerd's recorded requests byte for byte (headers,
// chunked empty bodies, create bodies) and checks each status the way workerd does.
func TestRecordedSequence(t *testing.T) {
	h := newHarness(t, Options{Image: "example/app:1"})
	app := startHTTPServer(t, "hello from the app")
	_, appPort, _ := net.SplitHostPort(app)
	closedPort := freePort(t)

	want := []int{200, 404, 200, 404, 200, 200, 201, 204, 200, 200, 200, 200, 201, 204, 0, 200, 400}
	reqs := readRecorded(t)
	if len(reqs) != len(want) {
		t.Fatalf("%d recorded requests, want %d", len(reqs), len(want))
	}
	var ingress string
	waited := make(chan reply, 1)
	for i, rq := range reqs {
		addr, network := h.sock, "unix"
		if rq.to == "INGRESS" {
			addr, network = net.JoinHostPort("127.0.0.1", ingress), "tcp"
		}
		switch {
		case rq.method == "POST" && strings.HasSuffix(rq.target, "/wait"):
			go func() { waited <- raw(t, network, addr, rq.method, rq.target, rq.hdrs, rq.body) }()
			continue
		case rq.method == "CONNECT":
			checkConnect(t, addr, rq, appPort, closedPort, want[i])
			continue
		}
		r := raw(t, network, addr, rq.method, rq.target, rq.hdrs, rq.body)
		if r.status != want[i] {
			t.Fatalf("%s %s %s: %d %s, want %d", rq.to, rq.method, rq.target, r.status, r.body, want[i])
		}
		if strings.HasSuffix(rq.target, "-proxy/json") {
			ingress = h.proxyPort(testProxy)
		}
		checkRecordedBody(t, rq, r)
	}

	checkRecordedInstance(t, h.b)
	select {
	case r := <-waited:
		t.Fatalf("wait answered %d %s before the container exited", r.status, r.body)
	case <-time.After(100 * time.Millisecond):
	}
	h.b.exit(testApp, 3)
	r := <-waited
	var wr waitResponse
	r.json(t, &wr)
	if r.status != 200 || wr.StatusCode != 3 {
		t.Fatalf("wait: %d %s, want 200 StatusCode 3", r.status, r.body)
	}
}

// checkRecordedInstance checks what the Backend was asked to run.
func checkRecordedInstance(t *testing.T, b *fakeBackend) {
	t.Helper()
	started, _, _ := b.snapshot()
	if len(started) != 1 {
		t.Fatalf("Backend.Start called %d times", len(started))
	}
	inst := started[0]
	if inst.Name != testApp || inst.Image != "example/app:1" || strings.Join(inst.Args, " ") != "/server --x" || inst.Internet {
		t.Errorf("instance %+v", inst)
	}
	if !containsString(inst.Env, "CLOUDFLARE_DURABLE_OBJECT_ID="+testDOID) || !containsString(inst.Env, "MESSAGE=hi") ||
		!containsString(inst.Env, "CLOUDFLARE_LOCATION=loc01") {
		t.Errorf("env %q: want MESSAGE, the real Durable Object id and the other CLOUDFLARE_ values", inst.Env)
	}
}

// checkRecordedBody checks what workerd reads from the answers it decodes.
func checkRecordedBody(t *testing.T, rq recorded, r reply) {
	t.Helper()
	switch {
	case rq.target == "/networks/bridge":
		var n network
		r.json(t, &n)
		if len(n.IPAM.Config) != 1 || n.IPAM.Config[0].Gateway != "127.0.0.1" || n.IPAM.Config[0].Subnet == "" {
			t.Errorf("bridge: %s", r.body)
		}
	case rq.to == "INGRESS" && rq.target == "/ca":
		if !strings.HasPrefix(string(r.body), "-----BEGIN CERTIFICATE-----") {
			t.Errorf("GET /ca: %q", r.body)
		}
	case strings.HasSuffix(rq.target, "-proxy/json"):
		var in inspectResponse
		r.json(t, &in)
		if in.State.Status != "running" || !in.State.Running {
			t.Errorf("proxy inspect: %s", r.body)
		}
	}
}

// checkConnect sends the recorded CONNECT, with the port moved to a live server (for
// 8080) or a closed port (for 9999), then the recorded tunnelled GET.
func checkConnect(t *testing.T, proxyAddr string, rq recorded, appPort, closedPort string, want int) {
	t.Helper()
	port := appPort
	if strings.HasSuffix(rq.target, ":9999") {
		port = closedPort
	}
	dst := "127.0.0.1:" + port
	conn, err := net.Dial("tcp", proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nx-dst-addr: %s\r\n\r\n", dst, dst)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != want {
		t.Fatalf("CONNECT %s: %d, want %d", rq.target, resp.StatusCode, want)
	}
	if want != 200 {
		return
	}
	fmt.Fprint(conn, "GET /hello HTTP/1.1\r\nhost: ping\r\n\r\n")
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if string(body) != "hello from the app /hello" {
		t.Fatalf("through the tunnel: %q", body)
	}
}

// startHTTPServer serves "<text> <path>" on a loopback port and returns its address.
func startHTTPServer(t *testing.T, text string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s", text, r.URL.Path)
	})}
	go func() { _ = hs.Serve(l) }()
	t.Cleanup(func() { hs.Close() })
	return l.Addr().String()
}

// freePort is a loopback port nothing listens on (a moment ago).
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(l.Addr().String())
	l.Close()
	return port
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
