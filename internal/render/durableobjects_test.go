package render_test

import (
	"strings"
	"testing"

	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
)

func TestTargetFor(t *testing.T) {
	_, d := doFixture(t)
	tg, err := render.TargetFor(d, render.Options{ClusterDomain: "example.internal"})
	if err != nil {
		t.Fatal(err)
	}
	// "<namespace>-<name>": no uid in it, so a re-created namespace keeps its ids.
	if want := "default-counters"; tg.UniqueKey != want {
		t.Errorf("uniqueKey %q, want %q", tg.UniqueKey, want)
	}
	// Every shard the namespace can ever have is addressable: a router learns a new
	// count while it is resharded (docs/scaling.md).
	if tg.Shards != *d.Spec.Shards || len(tg.ShardAddresses) != render.MaxShards {
		t.Fatalf("shards %d addresses %v", tg.Shards, tg.ShardAddresses)
	}
	if want := "counters-do-1.counters-do.default.svc.example.internal:9093"; tg.ShardAddresses[1] != want {
		t.Errorf("address %q, want %q", tg.ShardAddresses[1], want)
	}
	d.Status.UniqueKey = "kept"
	if tg, _ := render.TargetFor(d, render.Options{}); tg.UniqueKey != "kept" {
		t.Errorf("status.uniqueKey not kept: %q", tg.UniqueKey)
	}
}

func TestRenderDurableObjectErrors(t *testing.T) {
	w, d := doFixture(t)
	good, err := render.TargetFor(d, render.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		in   func() render.Input
		want string
	}{
		{"namespace not given", func() render.Input { return render.Input{Worker: w} },
			`spec.bindings[0].durableObjectNamespace.name: DurableObjectNamespace "counters" not found`},
		{"host not given", func() render.Input { return render.Input{Worker: w, Host: "other"} },
			`Input.Host: DurableObjectNamespace "other" not given`},
		{"host of another worker", func() render.Input {
			t := good
			t.Worker = "someone-else"
			return render.Input{Worker: w, DurableObjects: map[string]render.DurableObjectTarget{"counters": t}, Host: "counters"}
		}, `spec.workerRef.name is "someone-else", not the rendered Worker "counter"`},
		{"shards out of range", func() render.Input {
			t := good
			t.Shards = 65
			return render.Input{Worker: w, DurableObjects: map[string]render.DurableObjectTarget{"counters": t}}
		}, "spec.shards: 65 is outside 1 to 64"},
		{"addresses missing", func() render.Input {
			t := good
			t.ShardAddresses = t.ShardAddresses[:1]
			return render.Input{Worker: w, DurableObjects: map[string]render.DurableObjectTarget{"counters": t}}
		}, "1 shard addresses for 2 shards"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := render.Render(tc.in())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestRenderDurableObjectConfig(t *testing.T) {
	w, d := doFixture(t)
	tg, err := render.TargetFor(d, render.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dos := map[string]render.DurableObjectTarget{d.Name: tg}
	cases := []struct {
		name          string
		host          string
		want, notWant []string
		files         []string
	}{
		{name: "worker pod", want: []string{
			`wrapped = (moduleName = "workerd-operator:router"`,
			`(name = "workerd-operator:do-ids:counters", worker = (`,
			`durableObjectNamespaces = [(className = "Counter", uniqueKey = "` + tg.UniqueKey + `")]`,
			`(name = "workerd-operator:do-shard:counters:1", external = (address = "counters-do-1.counters-do.default.svc.cluster.local:9093", http = (capnpConnectHost = "capnp.workerd-operator.internal")))`,
		}, notWant: []string{`localDisk`, `name = "gateway"`, `POD_NAME`, `(name = "GATEWAY"`},
			files: []string{"shim/router.js", "shim/router-common.js", "shim/failure.js"}},
		{name: "shard pod", host: d.Name, want: []string{
			`durableObjectNamespaces = [(className = "Counter", uniqueKey = "` + tg.UniqueKey + `", enableSql = true, preventEviction = false)]`,
			`durableObjectStorage = (localDisk = "do-storage")`,
			`(name = "do-storage", disk = (writable = true))`,
			`(name = "gateway", http = (capnpConnectHost = "capnp.workerd-operator.internal"), service = "workerd-operator:gateway")`,
			`(name = "POD_NAME", fromEnvironment = "POD_NAME")`,
			`(name = "NS", durableObjectNamespace = (className = "Counter", serviceName = "counter"))`,
			// the health worker forwards the preStop drain to the gateway
			`(name = "SIDECAR", service = "sidecar"), (name = "GATEWAY", service = "workerd-operator:gateway")`,
		}, notWant: []string{`do-ids`},
			files: []string{"shim/gateway.js", "shim/router.js"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := render.Render(render.Input{Worker: w, DurableObjects: dos, Host: tc.host})
			if err != nil {
				t.Fatal(err)
			}
			paths := map[string]string{}
			for _, f := range out.Files {
				paths[f.Path] = string(f.Data)
			}
			conf := paths[podcontract.ConfigFile]
			for _, s := range tc.want {
				if !strings.Contains(conf, s) {
					t.Errorf("config lacks %s", s)
				}
			}
			for _, s := range tc.notWant {
				if strings.Contains(conf, s) {
					t.Errorf("config has %s", s)
				}
			}
			for _, f := range tc.files {
				if paths[f] == "" {
					t.Errorf("file %s not rendered", f)
				}
			}
			hasPodName := false
			for _, e := range out.Env {
				hasPodName = hasPodName || e.Name == render.PodNameEnv
			}
			if hasPodName != (tc.host != "") {
				t.Errorf("POD_NAME env %v on %s", hasPodName, tc.name)
			}
		})
	}
	args := strings.Join(render.ShardArgs(w), " ")
	for _, s := range []string{"--socket-addr=gateway=127.0.0.1:9193", "--directory-path=do-storage=/var/lib/workerd/do"} {
		if !strings.Contains(args, s) {
			t.Errorf("ShardArgs lack %s", s)
		}
	}
}
