package render_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/internalca"
	"github.com/workerd-operator/workerd-operator/internal/localrun"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/sidecar"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// doFixture is testdata/do/counter.yaml with testdata/do/counter.js as the main module.
func doFixture(t testing.TB) (*v1alpha1.Worker, *v1alpha1.DurableObjectNamespace) {
	t.Helper()
	return fixture(t, "counter")
}

// fixture is testdata/do/<name>.yaml with testdata/do/<name>.js as the main module.
func fixture(t testing.TB, name string) (*v1alpha1.Worker, *v1alpha1.DurableObjectNamespace) {
	t.Helper()
	w, d := readWorkerAndNamespace(t, filepath.Join("testdata", "do", name+".yaml"))
	js, err := os.ReadFile(filepath.Join("testdata", "do", name+".js"))
	if err != nil {
		t.Fatal(err)
	}
	content := string(js)
	w.Spec.Source.Inline.Modules[0].Content = &content
	return w, d
}

// readWorkerAndNamespace decodes a file holding a Worker, then a DurableObjectNamespace.
func readWorkerAndNamespace(t testing.TB, path string) (*v1alpha1.Worker, *v1alpha1.DurableObjectNamespace) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	w := &v1alpha1.Worker{}
	d := &v1alpha1.DurableObjectNamespace{}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	for _, into := range []any{w, d} {
		doc, err := r.Read()
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.UnmarshalStrict(doc, into); err != nil {
			t.Fatal(err)
		}
	}
	return w, d
}

// proc is one workerd process of the test "cluster", restartable with the same
// arguments (and so the same gateway address and storage directory).
type proc struct {
	t       testing.TB
	bin     string
	dir     string
	args    []string
	env     []string
	sockets int
	mu      sync.Mutex
	cmd     *exec.Cmd
	out     *bytes.Buffer
	addrs   map[string]string
	done    chan struct{}
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// start runs workerd and waits for a listen event per socket.
func (p *proc) start() {
	p.t.Helper()
	r, wr, err := os.Pipe()
	if err != nil {
		p.t.Fatal(err)
	}
	cmd := exec.Command(p.bin, append([]string{"serve", "--experimental", filepath.Join(p.dir, podcontract.ConfigFile), "--control-fd=3"}, p.args...)...)
	cmd.Dir = p.dir
	cmd.Env = append(os.Environ(), p.env...)
	p.mu.Lock()
	p.out = &bytes.Buffer{}
	p.mu.Unlock()
	cmd.Stdout = lockedWriter{&p.mu, p.out}
	cmd.Stderr = lockedWriter{&p.mu, p.out}
	cmd.ExtraFiles = []*os.File{wr}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	wr.Close()
	p.cmd = cmd
	p.addrs = map[string]string{}
	p.done = make(chan struct{})
	ready := make(chan struct{})
	addrs := p.addrs
	go func() {
		defer r.Close()
		sc := bufio.NewScanner(r)
		n := 0
		for sc.Scan() {
			var ev struct {
				Event, Socket string
				Port          int
			}
			if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Event != "listen" {
				continue
			}
			p.mu.Lock()
			addrs[ev.Socket] = fmt.Sprintf("127.0.0.1:%d", ev.Port)
			p.mu.Unlock()
			if n++; n == p.sockets {
				close(ready)
			}
		}
	}()
	done := p.done
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-ready:
	case <-done:
		p.t.Fatalf("workerd exited at startup:\n%s", p.output())
	case <-time.After(60 * time.Second):
		p.t.Fatalf("workerd did not report its sockets within 60s:\n%s", p.output())
	}
}

func (p *proc) addr(socket string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.addrs[socket]
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// kill sends SIGKILL (no drain) and waits for the exit.
func (p *proc) kill() {
	if p.cmd == nil {
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// doCluster is 2 shard processes and 3 Worker replicas, each on the rendered config.
type doCluster struct {
	shards   []*proc
	logs     []*syncBuf // each shard's sidecar's log lines
	replicas []*proc
	storage  []string // each shard's localDisk directory
	target   render.DurableObjectTarget
	client   *http.Client
}

func startDOCluster(t testing.TB, replicas int) *doCluster {
	t.Helper()
	w, d := doFixture(t)
	return startDOClusterFor(t, w, d, replicas)
}

// startDOClusterFor starts d's shards (each with its own storage directory) and
// replicas processes of w, all on the rendered configs.
func startDOClusterFor(t testing.TB, w *v1alpha1.Worker, d *v1alpha1.DurableObjectNamespace, replicas int) *doCluster {
	t.Helper()
	return startDOClusterTLS(t, w, d, replicas, nil)
}

// startDOClusterTLS is startDOClusterFor, with render.Options.InternalTLS and the
// files of tlsData (an internal TLS Secret's data) in each config's tls directory when
// tlsData is not nil.
func startDOClusterTLS(t testing.TB, w *v1alpha1.Worker, d *v1alpha1.DurableObjectNamespace, replicas int, tlsData map[string][]byte) *doCluster {
	t.Helper()
	opts := render.Options{InternalTLS: tlsData != nil}
	bin := testenv.WorkerdBinary(t)
	target, err := render.TargetFor(d, render.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The gateways: fixed loopback ports, so a restarted shard is found at the same address.
	target.ShardAddresses = target.ShardAddresses[:target.Shards]
	for i := range target.ShardAddresses {
		target.ShardAddresses[i] = testenv.FreeLoopbackAddr(t)
	}
	// A call waits this long for a shard that is away before it fails (120 s in pods).
	target.OwnerWaitMs = 5000
	dos := map[string]render.DurableObjectTarget{d.Name: target}
	shardOut, err := render.Render(render.Input{Worker: w, DurableObjects: dos, Host: d.Name, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	workerOut, err := render.Render(render.Input{Worker: w, DurableObjects: dos, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	c := &doCluster{target: target, client: &http.Client{Timeout: 60 * time.Second}}
	shardDir := filepath.Join(root, "shard-config")
	workerDir := filepath.Join(root, "worker-config")
	if err := localrun.WriteFiles(shardDir, shardOut.Files); err != nil {
		t.Fatal(err)
	}
	if err := localrun.WriteFiles(workerDir, workerOut.Files); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{shardDir, workerDir} {
		if tlsData == nil {
			break
		}
		if err := internalca.WriteFiles(filepath.Join(dir, podcontract.InternalTLSSubdir), tlsData); err != nil {
			t.Fatal(err)
		}
	}
	base := func(sidecarAddr string) []string {
		return []string{
			"--socket-addr=http=127.0.0.1:0", "--socket-addr=rpc=127.0.0.1:0", "--socket-addr=health=127.0.0.1:0", "--socket-addr=trigger=127.0.0.1:0",
			"--external-addr=sidecar=" + sidecarAddr,
		}
	}
	for i, gw := range target.ShardAddresses {
		st := filepath.Join(root, fmt.Sprintf("pvc-%d", i))
		if err := os.MkdirAll(st, 0o755); err != nil {
			t.Fatal(err)
		}
		// Each shard gets its own real sidecar (its channel registry, docs/channels.md).
		listen := gw
		if tlsData != nil { // the sidecar owns the gateway's address, workerd a loopback one
			listen = testenv.FreeLoopbackAddr(t)
			frontTLS(t, podcontract.GatewaySocket, gw, listen, shardDir)
		}
		logs := &syncBuf{}
		c.logs = append(c.logs, logs)
		p := &proc{t: t, bin: bin, dir: shardDir, sockets: 5,
			args: append(base(startTelemetrySidecar(t, logs)), "--socket-addr="+podcontract.GatewaySocket+"="+listen, "--directory-path="+render.DOStorageService+"="+st),
			env:  []string{render.PodNameEnv + "=" + target.ShardName(i)}}
		p.start()
		t.Cleanup(p.kill)
		c.shards = append(c.shards, p)
		c.storage = append(c.storage, st)
	}
	for i := 0; i < replicas; i++ {
		p := &proc{t: t, bin: bin, dir: workerDir, sockets: 4, args: base(testenv.FreeLoopbackAddr(t))}
		p.start()
		for _, sock := range []string{podcontract.RPCSocket, podcontract.TriggerSocket} {
			if tlsData != nil { // tests reach the sidecar's relay, as other pods do
				addr := testenv.FreeLoopbackAddr(t)
				frontTLS(t, sock, addr, p.addr(sock), workerDir)
				p.mu.Lock()
				p.addrs[sock] = addr
				p.mu.Unlock()
			}
		}
		t.Cleanup(p.kill)
		c.replicas = append(c.replicas, p)
	}
	return c
}

// frontTLS runs the sidecar's relay for socket (podcontract.FrontedSockets) on listen,
// terminating mutual TLS with the files under configDir and relaying to workerd's
// target, as the sidecar does in a pod (--front).
func frontTLS(t testing.TB, socket, listen, target, configDir string) {
	t.Helper()
	f, _ := podcontract.Fronted(socket)
	cfg, err := internalca.SocketConfig(filepath.Join(configDir, podcontract.InternalTLSSubdir), f.TrustedCA)
	if err != nil {
		t.Fatal(err)
	}
	r, err := sidecar.ListenRelay(listen, target, cfg, sidecar.RelayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = r.Serve() }()
	t.Cleanup(func() { _ = r.Close() })
}

// startSidecar runs a real sidecar (channels registry, on-disk store) on a free
// loopback address until the test ends and returns that address.
func startSidecar(t testing.TB) string {
	t.Helper()
	return startTelemetrySidecar(t, io.Discard)
}

// get sends GET path?query to the http socket of p and returns status and body.
func (c *doCluster) get(t testing.TB, p *proc, path string, q url.Values) (int, string) {
	t.Helper()
	resp, err := c.client.Get("http://" + p.addr(podcontract.HTTPSocket) + path + "?" + q.Encode())
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (c *doCluster) mustGet(t testing.TB, p *proc, path string, q url.Values) string {
	t.Helper()
	code, body := c.get(t, p, path, q)
	if code != 200 {
		t.Fatalf("GET %s?%s: %d %s", path, q.Encode(), code, body)
	}
	return body
}

// shardOf is the shard owning name, computed in Go (ShardFor) from the id workerd mints.
func (c *doCluster) shardOf(t testing.TB, name string) (string, int32) {
	t.Helper()
	id := c.mustGet(t, c.shards[0], "/id", url.Values{"name": {name}})
	s, err := render.ShardFor(id, c.target.Shards)
	if err != nil {
		t.Fatal(err)
	}
	return id, s
}

// waitFor polls cond (no timing is asserted; the deadline only bounds a hang).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func nameOnShard(t testing.TB, c *doCluster, prefix string, shard int32) (string, string) {
	t.Helper()
	for i := 0; i < 1000; i++ {
		n := fmt.Sprintf("%s-%d", prefix, i)
		id, s := c.shardOf(t, n)
		if s == shard {
			return n, id
		}
	}
	t.Fatalf("no name with prefix %s on shard %d", prefix, shard)
	return "", ""
}

func TestDurableObjectsAcrossShards(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 5 workerd processes")
	}
	c := startDOCluster(t, 3)
	_, d := doFixture(t)

	t.Run("1000 names x 10 increments, one owner each", func(t *testing.T) {
		const names, incs = 1000, 10
		type job struct{ name string }
		jobs := make(chan string)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var errs []string
		for g := 0; g < 16; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				k := g
				for n := range jobs {
					k++
					p := c.replicas[k%len(c.replicas)] // round-robin over replicas, offset per goroutine
					code, body := c.get(t, p, "/inc", url.Values{"name": {n}})
					if code != 200 {
						mu.Lock()
						errs = append(errs, fmt.Sprintf("%s: %d %s", n, code, body))
						mu.Unlock()
					}
				}
			}(g)
		}
		for r := 0; r < incs; r++ {
			for i := 0; i < names; i++ {
				jobs <- fmt.Sprintf("obj-%d", i)
			}
		}
		close(jobs)
		wg.Wait()
		if len(errs) > 0 {
			t.Fatalf("%d increments failed, first: %s", len(errs), errs[0])
		}
		perShard := make([]int, len(c.shards))
		for i := 0; i < names; i++ {
			n := fmt.Sprintf("obj-%d", i)
			if got := c.mustGet(t, c.replicas[i%len(c.replicas)], "/value", url.Values{"name": {n}}); got != fmt.Sprint(incs) {
				t.Errorf("%s: value %s, want %d", n, got, incs)
			}
			id, s := c.shardOf(t, n)
			perShard[s]++
			var on []int
			for k, dir := range c.storage {
				if _, err := os.Stat(filepath.Join(dir, c.target.UniqueKey, id+".sqlite")); err == nil {
					on = append(on, k)
				}
			}
			if len(on) != 1 || on[0] != int(s) {
				t.Errorf("%s (id %s): SQLite file on shards %v, want only on shard %d", n, id, on, s)
			}
		}
		t.Logf("objects per shard: %v", perShard)
		for s, n := range perShard {
			if n == 0 {
				t.Errorf("shard %d holds no object of %d", s, names)
			}
		}
	})

	t.Run("JS RPC", func(t *testing.T) {
		for s := int32(0); s < c.target.Shards; s++ {
			name, id := nameOnShard(t, c, fmt.Sprintf("rpc-s%d", s), s)
			// From a shard pod (in-process when s is that shard) and from a Worker replica.
			for _, via := range []*proc{c.shards[0], c.shards[1], c.replicas[0]} {
				before := c.mustGet(t, via, "/value", url.Values{"name": {name}})
				var b int
				fmt.Sscan(before, &b)
				if got := c.mustGet(t, via, "/inc", url.Values{"name": {name}, "by": {"5"}}); got != fmt.Sprint(b+5) {
					t.Errorf("shard %d: increment(5) from %v = %s, want %d", s, via.args[len(via.args)-1], got, b+5)
				}
				var info struct {
					ID     string
					Name   *string
					Value  int
					Tags   []string
					Nested struct{ OK bool }
				}
				if err := json.Unmarshal([]byte(c.mustGet(t, via, "/info", url.Values{"name": {name}})), &info); err != nil {
					t.Fatal(err)
				}
				if info.ID != id || info.Name == nil || *info.Name != name || info.Value != b+5 || len(info.Tags) != 2 || !info.Nested.OK {
					t.Errorf("info() = %+v, want id %s name %s value %d", info, id, name, b+5)
				}
				// by id (no name)
				if got := c.mustGet(t, via, "/value", url.Values{"id": {id}}); got != fmt.Sprint(b+5) {
					t.Errorf("value() by id = %s, want %d", got, b+5)
				}
				msg := "kaput: " + name
				code, body := c.get(t, via, "/boom", url.Values{"name": {name}, "msg": {msg}})
				if code != 500 || !strings.Contains(body, msg) {
					t.Errorf("thrown Error: %d %q, want 500 containing %q", code, body, msg)
				}
				for _, path := range []string{"/fn", "/passfn"} {
					code, body = c.get(t, via, path, url.Values{"name": {name}})
					if code != 500 || !strings.Contains(body, "cannot cross between shards") {
						t.Errorf("%s: %d %q, want 500 naming what cannot cross", path, code, body)
					}
				}
				var fr struct {
					Name, Path, Header string
					Leaked             *string
				}
				if err := json.Unmarshal([]byte(c.mustGet(t, via, "/fetch", url.Values{"name": {name}})), &fr); err != nil {
					t.Fatal(err)
				}
				if fr.Name != name || fr.Path != "/hello/"+name || fr.Header != "t1" || fr.Leaked != nil {
					t.Errorf("fetch() = %+v", fr)
				}
			}
		}
	})

	t.Run("alarm fires on its shard, also after a restart", func(t *testing.T) {
		for s := int32(0); s < c.target.Shards; s++ {
			name, _ := nameOnShard(t, c, fmt.Sprintf("alarm-s%d", s), s)
			c.mustGet(t, c.replicas[1], "/alarm", url.Values{"name": {name}, "ms": {"200"}})
			waitFor(t, "alarm of "+name, func() bool {
				return c.mustGet(t, c.replicas[1], "/alarms", url.Values{"name": {name}}) == "1"
			})
			// Set one far enough out to kill the shard first, then restart it.
			c.mustGet(t, c.replicas[2], "/alarm", url.Values{"name": {name}, "ms": {"1500"}})
			c.shards[s].kill()
			if _, err := os.Stat(filepath.Join(c.storage[s], c.target.UniqueKey, "metadata.sqlite")); err != nil {
				t.Errorf("alarm metadata of shard %d: %v", s, err)
			}
			c.shards[s].start()
			waitFor(t, "alarm of "+name+" after restart", func() bool {
				code, body := c.get(t, c.replicas[2], "/alarms", url.Values{"name": {name}})
				return code == 200 && body == "2"
			})
		}
	})

	t.Run("shard killed mid-traffic", func(t *testing.T) {
		const s = 1
		down, downID := nameOnShard(t, c, "kill-down", s)
		up, _ := nameOnShard(t, c, "kill-up", 0)
		want := fmt.Sprintf("shard %d (%s) is unavailable", s, c.target.ShardName(s))
		// A call in flight when the shard is killed is not retried: it may have run.
		cut := fmt.Sprintf("the connection to shard %d (%s) was lost while the call was in flight", s, c.target.ShardName(s))
		var mu sync.Mutex
		var okDown, failDown, okUp int
		var bad []string
		stop := c.traffic([]string{down, up}, func(name string, code int, body string, err error) {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				bad = append(bad, err.Error())
			case code == 200 && name == down:
				okDown++
			case code == 200:
				okUp++
			case name == down && (strings.Contains(body, want) || strings.Contains(body, cut)):
				failDown++
			default:
				bad = append(bad, fmt.Sprintf("%s: %d %s", name, code, body))
			}
		})
		counts := func() (int, int, int) {
			mu.Lock()
			defer mu.Unlock()
			return okDown, failDown, okUp
		}
		waitFor(t, "traffic on both shards", func() bool { d, _, u := counts(); return d >= 20 && u >= 20 })
		c.shards[s].kill()
		_, _, upAtKill := counts()
		// Each call for the killed shard waits OwnerWaitMs (5 s) for it, then fails.
		waitFor(t, "clear failures for the killed shard's object while the other shard serves", func() bool {
			_, f, u := counts()
			return f >= 8 && u >= upAtKill+8
		})
		stop()
		okD, failD, _ := counts()
		if len(bad) > 0 {
			t.Errorf("%d unexpected answers, first: %s", len(bad), bad[0])
		}
		// No other shard created a copy.
		if _, err := os.Stat(filepath.Join(c.storage[0], c.target.UniqueKey, downID+".sqlite")); err == nil {
			t.Errorf("shard 0 has a copy of %s", down)
		}
		c.shards[s].start()
		waitFor(t, "shard 1 back", func() bool {
			code, _ := c.get(t, c.replicas[0], "/value", url.Values{"name": {down}})
			return code == 200
		})
		var v int
		fmt.Sscan(c.mustGet(t, c.replicas[1], "/value", url.Values{"name": {down}}), &v)
		// Every acknowledged increment is kept; a call cut by the kill may or may not
		// have committed before it.
		if v < okD || v > okD+failD {
			t.Errorf("after restart: value %d, want between %d acknowledged and %d attempted", v, okD, okD+failD)
		}
		if got := c.mustGet(t, c.replicas[2], "/inc", url.Values{"name": {down}}); got != fmt.Sprint(v+1) {
			t.Errorf("increment after restart: %s, want %d", got, v+1)
		}
		t.Logf("down object: %d acknowledged, %d refused while down, value %d after restart", okD, failD, v)
	})
	t.Run("shard drained and replaced within the wait", func(t *testing.T) { drainedShard(t, c) })
	t.Run("gateway refuses an object of another shard", func(t *testing.T) {
		name, id := nameOnShard(t, c, "misroute", 0)
		req, _ := http.NewRequest("GET", "http://"+c.target.ShardAddresses[1]+"/", nil)
		req.Header.Set("x-workerd-operator-do-id", id)
		req.Header.Set("x-workerd-operator-do-name", name)
		resp, err := c.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 421 || !strings.Contains(string(b), "belongs to shard 0") {
			t.Errorf("misrouted fetch: %d %q", resp.StatusCode, b)
		}
	})
	_ = d
}

// drainedShard: a shard is drained (its preStop hook), killed and started again while
// clients call one of its objects through every replica: the calls wait for it and
// none fails; every increment is acknowledged once.
func drainedShard(t *testing.T, c *doCluster) {
	const s = 1
	name, _ := nameOnShard(t, c, "drained", s)
	var v0 int
	fmt.Sscan(c.mustGet(t, c.replicas[0], "/value", url.Values{"name": {name}}), &v0)
	var ok, failed atomic.Int64
	var bad atomic.Value
	stop := c.traffic([]string{name}, func(_ string, code int, body string, err error) {
		if err != nil || code != 200 {
			failed.Add(1)
			bad.Store(fmt.Sprintf("%d %s %v", code, body, err))
			return
		}
		ok.Add(1)
	})
	waitFor(t, "traffic", func() bool { return ok.Load() >= 20 })
	resp, err := c.client.Get("http://" + c.target.ShardAddresses[s] + render.GatewayDrainPath)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	c.shards[s].kill()
	c.shards[s].start()
	atRestart := ok.Load()
	waitFor(t, "calls served after the restart", func() bool { return ok.Load() >= atRestart+20 })
	stop()
	if n := failed.Load(); n != 0 {
		t.Errorf("%d calls failed while the shard was replaced, last: %v", n, bad.Load())
	}
	var v int
	fmt.Sscan(c.mustGet(t, c.replicas[0], "/value", url.Values{"name": {name}}), &v)
	if v != v0+int(ok.Load()) {
		t.Errorf("value %d, want %d + %d acknowledged", v, v0, ok.Load())
	}
	t.Logf("drain: %s; %d calls, all acknowledged once (value %d)", strings.TrimSpace(string(b)), ok.Load(), v)
}

// traffic has 4 clients call GET /inc for names in turn, round-robin over the
// replicas, each answer handed to record, until the returned stop is called (it
// returns when every client has stopped).
func (c *doCluster) traffic(names []string, record func(name string, code int, body string, err error)) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for k := g; ; k++ {
				select {
				case <-done:
					return
				default:
				}
				name := names[k%len(names)]
				p := c.replicas[k%len(c.replicas)]
				resp, err := c.client.Get("http://" + p.addr(podcontract.HTTPSocket) + "/inc?" + url.Values{"name": {name}}.Encode())
				if err != nil {
					record(name, 0, "", err)
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				record(name, resp.StatusCode, string(b), nil)
			}
		}(g)
	}
	return func() { close(done); wg.Wait() }
}
