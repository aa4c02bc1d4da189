package render_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/localrun"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/requestcf"
	"github.com/workerd-operator/workerd-operator/internal/sidecar/sidecartest"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// The hop headers (shim ingress.js).
const (
	hopTokenHeader  = "X-Workerd-Operator-Split-Token"
	hopClientHeader = "X-Workerd-Operator-Split-Client"
)

// splitWorker answers which version served the request and the client it was told of.
func splitWorker(version string) *v1alpha1.Worker {
	return sidecartest.InlineWorker("app", fmt.Sprintf(`export default {
  async fetch(request) {
    return Response.json({ version: %q, connectingIP: request.headers.get("CF-Connecting-IP"),
      colo: request.cf?.colo ?? null, body: await request.text(),
      hop: request.headers.get("X-Workerd-Operator-Split-Token") ?? request.headers.get("X-Workerd-Operator-Split-Client") });
  },
};
`, version))
}

type splitAnswer struct {
	Version, ConnectingIP, Body string
	Colo, Hop                   *string
}

// relay accepts on a loopback port and copies each connection to the address target
// returns when it arrives: the two versions' pods need each other's address first.
func relay(t *testing.T, target func() string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				u, err := net.Dial("tcp", target())
				if err != nil {
					return
				}
				defer u.Close()
				go io.Copy(u, c)
				io.Copy(c, u)
			}()
		}
	}()
	return ln.Addr().String()
}

// startSplit runs versions A (pa %) and B (100 - pa %) of Worker "app" as two workerd
// processes, each with the real sidecar's request.cf, and returns their http URLs.
func startSplit(t *testing.T, pa int32) (a, b string, ids [2]string) {
	t.Helper()
	sc := sidecartest.StartSidecar(t, sidecartest.Sidecar{RequestCF: &requestcf.Config{Colo: "TST"}})
	wa, wb := splitWorker("A"), splitWorker("B")
	ids = [2]string{wa.Spec.VersionID(), wb.Spec.VersionID()}
	if ids[0] == ids[1] {
		t.Fatal("the two versions have one id")
	}
	addrs := map[string]string{}
	relays := map[string]string{ids[0]: relay(t, func() string { return addrs[ids[0]] }), ids[1]: relay(t, func() string { return addrs[ids[1]] })}
	for i, w := range []*v1alpha1.Worker{wa, wb} {
		split := &render.Split{Worker: "app", Self: ids[i], TokenSecret: "app-split", Versions: []render.SplitVersion{
			{ID: ids[0], Percentage: pa, Address: relays[ids[0]]}, {ID: ids[1], Percentage: 100 - pa, Address: relays[ids[1]]}}}
		out, err := render.Render(render.Input{Worker: w, Split: split})
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := localrun.WriteFiles(dir, out.Files); err != nil {
			t.Fatal(err)
		}
		other := ids[1-i]
		l, err := localrun.StartLocal(context.Background(), localrun.LocalOptions{
			Binary: testenv.WorkerdBinary(t), Dir: dir,
			Externals: map[string]string{podcontract.SidecarService: sc, "workerd-operator:version:" + other: relays[other]},
			Env:       []string{"WORKERD_SPLIT_TOKEN=hop-token-of-the-test"},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.Stop)
		addrs[ids[i]] = l.Addrs[podcontract.HTTPSocket]
	}
	return "http://" + addrs[ids[0]], "http://" + addrs[ids[1]], ids
}

func splitGet(t *testing.T, hc *http.Client, url string, h map[string]string, body string) splitAnswer {
	t.Helper()
	method := http.MethodGet
	if body != "" {
		method = http.MethodPost
	}
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a splitAnswer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		t.Fatalf("status %d: %v", resp.StatusCode, err)
	}
	return a
}

// TestVersionSplit: each pod's ingress splits requests 90/10 between the versions
// (within 3 points over 2,000 requests from either version's pods), honours
// Cloudflare-Workers-Version-Overrides for this Worker and keeps a
// Cloudflare-Workers-Version-Key on one version
// (https://developers.cloudflare.com/workers/versions-and-deployments/gradual-deployments/version-affinity/);
// a request sent on to the other version keeps its client, body and cf, and a
// client cannot pose as the other version's ingress.
func TestVersionSplit(t *testing.T) {
	a, b, ids := startSplit(t, 90)
	// The client's address is not the relay's (127.0.0.1): a request sent on must keep it.
	const client = "127.0.0.77"
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(client)}, Timeout: 5 * time.Second}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
	served := map[string]int{}
	for i := range 2000 {
		url := a
		if i%2 == 1 {
			url = b
		}
		served[splitGet(t, hc, url, nil, "").Version]++
	}
	if served["A"] < 1740 || served["A"] > 1860 || served["A"]+served["B"] != 2000 {
		t.Errorf("2,000 requests: A served %d, B %d; want A 1,800 ± 60", served["A"], served["B"])
	}
	for _, tc := range []struct{ header, want string }{
		{fmt.Sprintf(`app="%s"`, ids[1]), "B"},
		{fmt.Sprintf(`other="%s", app="%s"`, ids[1], ids[0]), "A"},
	} {
		for _, url := range []string{a, b} {
			for range 20 {
				if got := splitGet(t, hc, url, map[string]string{"Cloudflare-Workers-Version-Overrides": tc.header}, "").Version; got != tc.want {
					t.Fatalf("override %s at %s: served by %s, want %s", tc.header, url, got, tc.want)
				}
			}
		}
	}
	keys := map[string]int{}
	for k := range 200 {
		key := fmt.Sprintf("user-%d", k)
		first := splitGet(t, hc, a, map[string]string{"Cloudflare-Workers-Version-Key": key}, "").Version
		for _, url := range []string{a, b, a} {
			if got := splitGet(t, hc, url, map[string]string{"Cloudflare-Workers-Version-Key": key}, "").Version; got != first {
				t.Fatalf("key %s: served by %s, then %s", key, first, got)
			}
		}
		keys[first]++
	}
	if keys["B"] == 0 || keys["B"] > 50 {
		t.Errorf("200 keys: %d on B, want about 20", keys["B"])
	}
	over := map[string]string{"Cloudflare-Workers-Version-Overrides": fmt.Sprintf(`app="%s"`, ids[1])}
	got := splitGet(t, hc, a, over, "the body")
	if got.Version != "B" || got.ConnectingIP != client || got.Colo == nil || *got.Colo != "TST" || got.Body != "the body" || got.Hop != nil {
		t.Errorf("sent on to B: %+v, want B's answer for client %s, colo TST, the body, no hop header", got, client)
	}
	forged := map[string]string{hopTokenHeader: "guess", hopClientHeader: `{"clientIp":"203.0.113.9"}`,
		"Cloudflare-Workers-Version-Overrides": fmt.Sprintf(`app="%s"`, ids[0])}
	if got := splitGet(t, hc, a, forged, ""); got.ConnectingIP != client || got.Hop != nil {
		t.Errorf("a forged hop: %+v, want client %s and no hop header", got, client)
	}
}

// TestVersionAtZero: a version at 0 percent serves only the requests whose
// Cloudflare-Workers-Version-Overrides names it (a smoke test,
// https://developers.cloudflare.com/workers/versions-and-deployments/version-overrides/).
func TestVersionAtZero(t *testing.T) {
	a, b, ids := startSplit(t, 100)
	hc := &http.Client{Timeout: 10 * time.Second}
	for i := range 200 {
		url := a
		if i%2 == 1 {
			url = b
		}
		if got := splitGet(t, hc, url, nil, "").Version; got != "A" {
			t.Fatalf("request %d served by %s, want A (B is at 0 %%)", i, got)
		}
	}
	over := map[string]string{"Cloudflare-Workers-Version-Overrides": fmt.Sprintf(`app="%s"`, ids[1])}
	if got := splitGet(t, hc, a, over, "").Version; got != "B" {
		t.Errorf("override naming B served by %s", got)
	}
}

// TestHopToPodNotSplitting: a pod that does not split (a rollout into or out of a
// split) still trusts a hop with its Worker's token, and a pod of a Worker without the
// token removes the hop headers: the user's code never sees them.
func TestHopToPodNotSplitting(t *testing.T) {
	sc := sidecartest.StartSidecar(t, sidecartest.Sidecar{RequestCF: &requestcf.Config{Colo: "TST"}})
	const token = "hop-token-of-the-test"
	// As the sending ingress makes it: the client's address set, the hop headers added.
	hopped := map[string]string{hopTokenHeader: token, hopClientHeader: `{"clientIp":"203.0.113.9","cf":{"colo":"HOP"}}`,
		"CF-Connecting-IP": "203.0.113.9"}
	for _, tc := range []struct {
		name             string
		split            *render.Split
		client, wantColo string
	}{
		{"receiving only", &render.Split{Worker: "app", Self: "x", TokenSecret: "app-split"}, "203.0.113.9", "HOP"},
		{"never split", nil, "127.0.0.1", "TST"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := splitWorker("C")
			out, err := render.Render(render.Input{Worker: w, Split: tc.split})
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			if err := localrun.WriteFiles(dir, out.Files); err != nil {
				t.Fatal(err)
			}
			l, err := localrun.StartLocal(context.Background(), localrun.LocalOptions{
				Binary: testenv.WorkerdBinary(t), Dir: dir, Externals: map[string]string{podcontract.SidecarService: sc},
				Env: []string{"WORKERD_SPLIT_TOKEN=" + token},
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(l.Stop)
			got := splitGet(t, &http.Client{Timeout: 10 * time.Second}, "http://"+l.Addrs[podcontract.HTTPSocket], hopped, "")
			if got.Hop != nil || got.ConnectingIP != tc.client || got.Colo == nil || *got.Colo != tc.wantColo {
				t.Errorf("got %+v, want client %s, colo %s and no hop header", got, tc.client, tc.wantColo)
			}
		})
	}
}
