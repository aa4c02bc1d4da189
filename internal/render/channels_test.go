package render_test

import (
	"strings"
	"testing"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
)

// A namespace with spec.channels.enabled gives the hosted class's Worker, and only it,
// the wrapped channels binding of docs/channels.md.
func TestChannelsBinding(t *testing.T) {
	cases := []struct {
		name     string
		channels *v1alpha1.ChannelsSpec
		host     bool
		extra    string // a user binding name
		want     string // binding name in the config, "" = none
		wantErr  string
	}{
		{name: "disabled", channels: nil, host: true},
		{name: "enabled but not enabled", channels: &v1alpha1.ChannelsSpec{Binding: "X"}, host: true},
		{name: "default name on the shard", channels: &v1alpha1.ChannelsSpec{Enabled: true}, host: true, want: render.DefaultChannelsBinding},
		{name: "named", channels: &v1alpha1.ChannelsSpec{Enabled: true, Binding: "ROOM_CHANNELS"}, host: true, want: "ROOM_CHANNELS"},
		{name: "not on Worker pods", channels: &v1alpha1.ChannelsSpec{Enabled: true}, host: false},
		{name: "clash with a user binding", channels: &v1alpha1.ChannelsSpec{Enabled: true}, host: true, extra: render.DefaultChannelsBinding,
			wantErr: `is the channels binding of DurableObjectNamespace counters`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w, d := doFixture(t)
			d.Spec.Channels = tc.channels
			if tc.extra != "" {
				txt := "x"
				w.Spec.Bindings = append(w.Spec.Bindings, v1alpha1.Binding{Name: tc.extra, Text: &txt})
			}
			target, err := render.TargetFor(d, render.Options{})
			if err != nil {
				t.Fatal(err)
			}
			in := render.Input{Worker: w, DurableObjects: map[string]render.DurableObjectTarget{d.Name: target}}
			if tc.host {
				in.Host = d.Name
			}
			out, err := render.Render(in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Render error = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			cfg := string(fileByPath(t, out, podcontract.ConfigFile))
			hasModule := strings.Contains(cfg, `(name = "workerd-operator:channels", esModule = embed "shim/channels.js", internal = true)`)
			hasFile := false
			for _, f := range out.Files {
				hasFile = hasFile || f.Path == podcontract.ShimSubdir+"/"+render.ChannelsFile
			}
			if tc.want == "" {
				if hasModule || hasFile || strings.Contains(cfg, "workerd-operator:channels") {
					t.Fatalf("channels rendered although not wanted:\n%s", cfg)
				}
				return
			}
			line := `(name = "` + tc.want + `", wrapped = (moduleName = "workerd-operator:channels", innerBindings = [(name = "sidecar", service = "sidecar"), (name = "config", json = "{\"namespace\":\"` + d.Name + `\"}")])),`
			if !strings.Contains(cfg, line) || !hasModule || !hasFile {
				t.Fatalf("want binding line %s, the internal module and shim/channels.js; config:\n%s", line, cfg)
			}
		})
	}
}

func fileByPath(t *testing.T, out *render.Output, path string) []byte {
	t.Helper()
	for _, f := range out.Files {
		if f.Path == path {
			return f.Data
		}
	}
	t.Fatalf("no rendered file %s", path)
	return nil
}
