package outbound_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/localrun"
	"github.com/workerd-operator/workerd-operator/internal/outbound"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]string{
		"public": "public", "10.96.0.1": "10.96.0.1/32", "10.96.3.0/12": "10.96.0.0/12", "fd00::1": "fd00::1/128",
	} {
		if got, err := outbound.Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "network", "unix", "10.0.0.0/33", "example.com"} {
		if _, err := outbound.Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

// TestWithin: an author's entry is within the admin's bound when it allows no address
// the bound does not.
func TestWithin(t *testing.T) {
	bound := []string{"public", "10.96.0.0/12"}
	cases := []struct {
		entry string
		want  bool
	}{
		{"public", true}, {"10.96.0.0/12", true}, {"10.100.0.0/16", true}, {"10.96.0.10/32", true},
		{"203.0.113.0/24", true}, {"2001:db8::/32", true},
		{"10.0.0.0/8", false}, {"private", false}, {"local", false}, {"127.0.0.1/32", false},
		{"169.254.169.254/32", false}, {"0.0.0.0/0", false}, {"172.16.0.0/12", false}, {"fd00::/8", false},
	}
	for _, c := range cases {
		if got := outbound.Within(c.entry, bound); got != c.want {
			t.Errorf("Within(%q, %v) = %v, want %v", c.entry, bound, got, c.want)
		}
	}
	if !outbound.Within("10.1.0.0/16", []string{"private"}) || !outbound.Within("127.0.0.1/32", []string{"local"}) || outbound.Within("10.1.0.0/16", []string{"local"}) {
		t.Error("token ranges: want 10.1/16 within private, 127.0.0.1 within local, 10.1/16 not within local")
	}
}

func TestEffective(t *testing.T) {
	def := outbound.Rules{Allow: []string{"public", "10.96.0.0/12"}, Deny: []string{"10.96.0.1/32"}}
	got := outbound.Effective(nil, []string{"203.0.113.0/24"}, def)
	want := outbound.Rules{Allow: def.Allow, Deny: []string{"203.0.113.0/24", "10.96.0.1/32"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("default allow: got %+v, want %+v", got, want)
	}
	got = outbound.Effective([]string{"10.96.0.0/16"}, nil, def)
	if !reflect.DeepEqual(got, outbound.Rules{Allow: []string{"10.96.0.0/16"}, Deny: def.Deny}) {
		t.Errorf("author allow: got %+v (the admin's deny must stay)", got)
	}
}

// TestIPBlocks: NetworkPolicy egress blocks; public is every address but the private
// and reserved ranges; loopback is left out; a denied CIDR becomes an except.
func TestIPBlocks(t *testing.T) {
	got := outbound.IPBlocks(outbound.Rules{Allow: []string{"10.96.0.0/12", "local", "public"}, Deny: []string{"10.96.0.10/32", "203.0.113.0/24"}})
	want := []outbound.IPBlock{
		{CIDR: "10.96.0.0/12", Except: []string{"10.96.0.10/32"}},
		{CIDR: "0.0.0.0/0", Except: []string{"10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.168.0.0/16", "224.0.0.0/3", "10.96.0.10/32", "203.0.113.0/24"}},
		{CIDR: "::/0", Except: []string{"::1/128", "fc00::/7", "fe80::/10", "ff00::/8"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("IPBlocks:\n got %+v\nwant %+v", got, want)
	}
}

// probeWorker fetches http://<?a=>/ and answers when the attempt failed or had a
// second to run; the log says whether workerd refused it (it logs every refused fetch,
// a refused connect() only once per process).
const probeWorker = `export default {
  async fetch(request) {
    const a = new URL(request.url).searchParams.get("a");
    await Promise.race([fetch("http://" + a + "/").catch(() => {}), new Promise((r) => setTimeout(r, 1000))]);
    return new Response("done");
  },
};
`

// TestTokenRangesMatchWorkerd: the pinned workerd refuses exactly the probe addresses
// outside each token's ranges as Within models them.
func TestTokenRangesMatchWorkerd(t *testing.T) {
	probes := []string{"10.1.1.1", "100.64.0.1", "127.0.0.1", "169.254.1.1", "172.16.0.1", "192.168.0.1", "0.0.0.1", "192.0.2.1", "224.0.0.1", "240.0.0.1"}
	for _, token := range []string{outbound.Public, outbound.Private, outbound.Local} {
		l := runProbes(t, token, probes)
		// Every expected refusal is logged before the response; wait for the lines.
		var out string
		for i := 0; i < 50; i++ {
			if out = l.Output(); strings.Count(out, "is not allowed") >= refusals(token, probes) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		for _, ip := range probes {
			refused := strings.Contains(out, "connecting to "+ip+":9 is not allowed")
			if want := !outbound.Within(ip+"/32", []string{token}); refused != want {
				t.Errorf("allow=[%s] %s: workerd refused=%v, outbound.Within says refused=%v", token, ip, refused, want)
			}
		}
	}
}

func refusals(token string, probes []string) int {
	n := 0
	for _, ip := range probes {
		if !outbound.Within(ip+"/32", []string{token}) {
			n++
		}
	}
	return n
}

func runProbes(t *testing.T, token string, probes []string) *localrun.Local {
	dir := t.TempDir()
	config := fmt.Sprintf(`using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [
    (name = "w", worker = (modules = [(name = "w.js", esModule = embed "w.js")], compatibilityDate = "2025-06-01")),
    (name = "internet", network = (allow = [%q])),
    (name = "sidecar", external = (address = "127.0.0.1:1", http = ())),
  ],
  sockets = [(name = "http", http = (), service = "w")],
);`, token)
	for name, body := range map[string]string{"config.capnp": config, "w.js": probeWorker} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	l, err := localrun.StartLocal(ctx, localrun.LocalOptions{Binary: testenv.WorkerdBinary(t), Dir: dir, Sockets: []string{"http"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Stop)
	errs := make(chan error, len(probes))
	for _, p := range probes {
		go func() {
			resp, err := (&http.Client{Timeout: 30 * time.Second}).Get("http://" + l.Addrs["http"] + "/?a=" + p + ":9")
			if err == nil {
				resp.Body.Close()
			}
			errs <- err
		}()
	}
	for range probes {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	return l
}
