package render

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// register adds a binding kind to the renderer's table for the rest of the test, and
// classifies bindings with classify (the API's Binding.Kind for the rest): a kind the
// API does not have yet needs both.
func register(t *testing.T, kind v1alpha1.BindingKind, newKind func(Input) (bindingKind, error),
	classify func(v1alpha1.Binding) v1alpha1.BindingKind) {
	t.Helper()
	saved, savedKindOf := bindingKinds, kindOf
	bindingKinds = append(append(bindingKinds[:0:0], bindingKinds...), struct {
		kind    v1alpha1.BindingKind
		newKind func(Input) (bindingKind, error)
	}{kind, newKind})
	kindOf = func(b v1alpha1.Binding) v1alpha1.BindingKind {
		if k := classify(b); k != "" {
			return k
		}
		return b.Kind()
	}
	t.Cleanup(func() { bindingKinds, kindOf = saved, savedKindOf })
}

// shoutKind is a test-only kind: a text binding whose name starts with SHOUT_ reaches
// the Worker upper-cased through the container env, and each one adds an external
// service, a file and an extension module.
type shoutKind struct{ names []string }

const shoutKindName v1alpha1.BindingKind = "shout"

func classifyShout(b v1alpha1.Binding) v1alpha1.BindingKind {
	if b.Text != nil && strings.HasPrefix(b.Name, "SHOUT_") {
		return shoutKindName
	}
	return ""
}

func (k *shoutKind) bind(field string, b v1alpha1.Binding) (string, error) {
	if *b.Text == "" {
		return "", fmt.Errorf("%s.text: must not be empty", field)
	}
	k.names = append(k.names, b.Name)
	return kv("fromEnvironment", Quote("SHOUT_ENV_"+b.Name)), nil
}

func (k *shoutKind) contribute(x *extras) error {
	for _, n := range k.names {
		x.services.item(named("shout:"+n), kv("external", tuple(kv("address", Quote("shout.invalid:80")), "http = ()")))
		x.env = append(x.env, corev1.EnvVar{Name: "SHOUT_ENV_" + n, Value: strings.ToUpper(n)})
		x.files = append(x.files, newFile("shout/"+n+".txt", []byte(n), false))
	}
	if len(k.names) > 0 {
		x.addExtension("test:shout", "shout.js")
	}
	return nil
}

// A binding kind plugs in through the table alone: Render, its bindings loop, the
// config writer and the Output need no change, and neither do the controllers, which
// only pass Render's Output on.
func TestBindingKindPlugsIn(t *testing.T) {
	register(t, shoutKindName, func(Input) (bindingKind, error) { return &shoutKind{}, nil }, classifyShout)
	w := baseWorker()
	w.Spec.Bindings = []v1alpha1.Binding{
		{Name: "PLAIN", Text: ptr.To("quiet")},
		{Name: "SHOUT_HELLO", Text: ptr.To("hello")},
	}
	out, err := Render(Input{Worker: w})
	if err != nil {
		t.Fatal(err)
	}
	var config string
	paths := map[string]bool{}
	for _, f := range out.Files {
		paths[f.Path] = true
		if f.Path == podcontract.ConfigFile {
			config = string(f.Data)
		}
	}
	for _, want := range []string{
		`        (name = "PLAIN", text = "quiet"),`,
		`        (name = "SHOUT_HELLO", fromEnvironment = "SHOUT_ENV_SHOUT_HELLO"),`,
		`    (name = "shout:SHOUT_HELLO", external = (address = "shout.invalid:80", http = ())),`,
		`    (name = "test:shout", esModule = embed "shim/shout.js", internal = true),`,
	} {
		if !strings.Contains(config, want+"\n") {
			t.Errorf("config lacks line %q:\n%s", want, config)
		}
	}
	if !paths["shout/SHOUT_HELLO.txt"] {
		t.Errorf("file shout/SHOUT_HELLO.txt not rendered: %v", paths)
	}
	if len(out.Env) != 1 || out.Env[0].Name != "SHOUT_ENV_SHOUT_HELLO" || out.Env[0].Value != "SHOUT_HELLO" {
		t.Errorf("env = %v", out.Env)
	}

	w.Spec.Bindings[1].Text = ptr.To("")
	if _, err := Render(Input{Worker: w}); err == nil || err.Error() != "spec.bindings[1].text: must not be empty" {
		t.Errorf("the kind's own check: err = %v", err)
	}
	w.Spec.Bindings[1] = v1alpha1.Binding{Name: "NONE"}
	want := "spec.bindings[1]: exactly one of text, json, secretKeyRef, service, durableObjectNamespace, workflow, kvNamespace, d1Database, queue, hyperdrive, r2Bucket, ai, dispatchNamespace or shout must be set (got 0)"
	if _, err := Render(Input{Worker: w}); err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
}

// Every kind the API has is in the renderer's table, in the API's order.
func TestBindingKindsCoverTheAPI(t *testing.T) {
	api := v1alpha1.BindingKinds()
	if len(api) != len(bindingKinds) {
		t.Fatalf("the API has %d binding kinds, the renderer's table %d", len(api), len(bindingKinds))
	}
	for i, k := range api {
		if bindingKinds[i].kind != k {
			t.Errorf("row %d: renderer has %q, API %q", i, bindingKinds[i].kind, k)
		}
	}
}
