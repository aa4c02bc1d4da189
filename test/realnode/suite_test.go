package realnode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/workerd-operator/workerd-operator/hack/ociimage"
	"github.com/workerd-operator/workerd-operator/internal/installer"
	"github.com/workerd-operator/workerd-operator/internal/ociregistry"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/toolchain"
)

const (
	fleetGroup   = "fleet.workerd-operator.io"
	fieldManager = "realnode-test"
	sampleNS     = "default"
)

var (
	cluster   *node
	repoRoot  string
	bundle    []*unstructured.Unstructured
	samples   []*unstructured.Unstructured
	managerNS string
)

// buildImages writes the image archives into <dir>/images before the namespaces are
// entered (go build may need the module proxy; the namespace has no route out).
func buildImages(dir string) (*ociimage.Archives, error) {
	root, err := toolchain.RepoRoot()
	if err != nil {
		return nil, err
	}
	workerd, err := toolchain.Workerd()
	if err != nil {
		return nil, err
	}
	if _, err := toolchain.Registry(); err != nil { // built here: the namespace has no route to the module proxy
		return nil, err
	}
	if err := prepareTemplates(filepath.Join(dir, "templates")); err != nil {
		return nil, err
	}
	a, err := ociimage.ProjectImages(root, filepath.Join(dir, "images"), workerd, installer.DefaultOperatorImage, installer.DefaultWorkerdImage)
	if err != nil {
		return nil, err
	}
	// The bundle of TestImageSourceServes: one ES module under /bundle of an image (the
	// renderer embeds only spec.source.image.main: it cannot list an image's files).
	bundle := &ociimage.Image{Ref: bundleImage, Layers: [][]ociimage.File{{
		{Path: "/bundle", Dir: true, Mode: 0o755},
		{Path: "/bundle/index.js", Mode: 0o644, Data: []byte(`const greeting = "from an image: ";
export default { async fetch(req) { return new Response(greeting + new URL(req.url).pathname + "\n"); } };
`)},
	}}}
	if err := bundle.WriteArchive(filepath.Join(dir, "images", "bundle.tar")); err != nil {
		return nil, err
	}
	if err := buildPrevious(root, dir); err != nil {
		return nil, err
	}
	return a, writeS3Image(dir)
}

// bundleImage holds a Worker's modules (TestImageSourceServes).
const bundleImage = "localhost/workerd-operator/realnode-bundle:1"

// inside runs in the namespaces: it starts the node, installs the operator and the
// samples, runs the tests and stops everything.
func inside(m interface{ Run() int }, dir, cgroupRoot string) int {
	runDir, runCgroupRoot = dir, cgroupRoot
	start := time.Now()
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "realnode: %5.1fs "+format+"\n", append([]any{time.Since(start).Seconds()}, args...)...)
	}
	if err := isolate(dir); err != nil {
		fmt.Fprintln(os.Stderr, "realnode: isolate:", err)
		return 1
	}
	var err error
	if repoRoot, err = toolchain.RepoRoot(); err != nil {
		fmt.Fprintln(os.Stderr, "realnode:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	cluster, err = startNode(ctx, dir, cgroupRoot, logf)
	if err != nil {
		fmt.Fprintln(os.Stderr, "realnode: node:", err)
		return 1
	}
	defer cluster.stop()
	// On every address of the namespace: joining nodes pull from nodeIP.
	reg, err := ociregistry.Start(ctx, ociregistry.Config{Addr: ":" + strconv.Itoa(podcontract.DevRegistryPort), Dir: filepath.Join(dir, "registry")})
	if err != nil {
		fmt.Fprintln(os.Stderr, "realnode: registry:", err)
		return 1
	}
	defer reg.Stop()
	logf("node Ready; installing the operator")
	if err := install(ctx, logf); err != nil {
		fmt.Fprintln(os.Stderr, "realnode:", err)
		cluster.dumpPods(ctx)
		return 1
	}
	logf("operator and samples Ready; running the tests")
	code := m.Run()
	if code != 0 {
		cluster.dumpPods(ctx)
	}
	logf("stopping the node")
	return code
}

func (n *node) labelRestricted(ctx context.Context, ns string) error {
	patch := []byte(`{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"restricted","pod-security.kubernetes.io/enforce-version":"latest"}}}`)
	_, err := n.client.CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

func decodeAll(b []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// dynamic is a dynamic client of the node's API server and a REST mapper for it.
func (n *node) dynamic() (dynamic.Interface, *restmapper.DeferredDiscoveryRESTMapper, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(n.rest)
	if err != nil {
		return nil, nil, err
	}
	dyn, err := dynamic.NewForConfig(n.rest)
	return dyn, restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)), err
}

// apply server-side applies objects in order, retrying while a kind is not served yet
// or a webhook is not reachable yet.
func (n *node) apply(ctx context.Context, objs []*unstructured.Unstructured, timeout time.Duration) error {
	dyn, mapper, err := n.dynamic()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for _, o := range objs {
		for {
			err := applyOne(ctx, dyn, mapper, o)
			if err == nil {
				break
			}
			if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("apply %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
			}
			mapper.Reset()
			time.Sleep(time.Second)
		}
	}
	return nil
}

func resourceFor(dyn dynamic.Interface, mapper meta.RESTMapper, o *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := o.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ns := o.GetNamespace()
		if ns == "" {
			ns = sampleNS
		}
		return dyn.Resource(m.Resource).Namespace(ns), nil
	}
	return dyn.Resource(m.Resource), nil
}

func applyOne(ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, o *unstructured.Unstructured) error {
	ri, err := resourceFor(dyn, mapper, o)
	if err != nil {
		return err
	}
	data, err := o.MarshalJSON()
	if err != nil {
		return err
	}
	force := true
	_, err = ri.Patch(ctx, o.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: fieldManager, Force: &force})
	return err
}

// waitReady waits until every fleet object is Ready=True and every Deployment and
// StatefulSet has its replicas ready.
func (n *node) waitReady(ctx context.Context, objs []*unstructured.Unstructured, timeout time.Duration) error {
	dyn, mapper, err := n.dynamic()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for {
		var pending []string
		for _, o := range objs {
			gvk := o.GroupVersionKind()
			if gvk.Group != fleetGroup && !(gvk.Group == "apps" && (gvk.Kind == "Deployment" || gvk.Kind == "StatefulSet")) {
				continue
			}
			if why := notReady(ctx, dyn, mapper, o); why != "" {
				pending = append(pending, fmt.Sprintf("%s %s/%s: %s", gvk.Kind, o.GetNamespace(), o.GetName(), why))
			}
		}
		if len(pending) == 0 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("not ready after %s:\n  %s", timeout, strings.Join(pending, "\n  "))
		}
		time.Sleep(time.Second)
	}
}

func notReady(ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, o *unstructured.Unstructured) string {
	ri, err := resourceFor(dyn, mapper, o)
	if err != nil {
		return err.Error()
	}
	cur, err := ri.Get(ctx, o.GetName(), metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	if o.GroupVersionKind().Group == "apps" {
		want, _, _ := unstructured.NestedInt64(cur.Object, "spec", "replicas")
		ready, _, _ := unstructured.NestedInt64(cur.Object, "status", "readyReplicas")
		if ready < want {
			return fmt.Sprintf("%d/%d replicas ready", ready, want)
		}
		return ""
	}
	conds, _, _ := unstructured.NestedSlice(cur.Object, "status", "conditions")
	for _, ci := range conds {
		cm, _ := ci.(map[string]any)
		if cm["type"] == "Ready" {
			if cm["status"] == "True" {
				return ""
			}
			return fmt.Sprintf("Ready=%v (%v: %v)", cm["status"], cm["reason"], cm["message"])
		}
	}
	return "no Ready condition yet"
}

// dumpPods prints every pod's phase, container states and log tails, and the tails of
// the node's own logs.
func (n *node) dumpPods(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	pods, err := n.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "realnode: list pods:", err)
	} else {
		for _, p := range pods.Items {
			fmt.Fprintf(os.Stderr, "==> pod %s/%s %s %s\n", p.Namespace, p.Name, p.Status.Phase, p.Status.Message)
			for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
				fmt.Fprintf(os.Stderr, "    %s ready=%v restarts=%d state=%s\n", cs.Name, cs.Ready, cs.RestartCount, containerState(cs))
				logs, _ := n.client.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: cs.Name, TailLines: ptr(int64(15))}).DoRaw(ctx)
				if len(logs) > 0 {
					fmt.Fprintf(os.Stderr, "      %s\n", strings.ReplaceAll(strings.TrimSpace(string(logs)), "\n", "\n      "))
				}
			}
		}
		evs, _ := n.client.CoreV1().Events("").List(ctx, metav1.ListOptions{})
		if evs != nil {
			for _, e := range evs.Items {
				if e.Type == corev1.EventTypeWarning {
					fmt.Fprintf(os.Stderr, "event %s/%s %s: %s\n", e.InvolvedObject.Namespace, e.InvolvedObject.Name, e.Reason, e.Message)
				}
			}
		}
	}
	for _, c := range []string{"kubelet", "containerd", "kube-proxy", "kube-apiserver"} {
		fmt.Fprintf(os.Stderr, "==> %s log (tail) <==\n%s\n", c, n.logTail(c, 25))
	}
}

func containerState(cs corev1.ContainerStatus) string {
	switch {
	case cs.State.Running != nil:
		return "running"
	case cs.State.Waiting != nil:
		return "waiting " + cs.State.Waiting.Reason + ": " + cs.State.Waiting.Message
	case cs.State.Terminated != nil:
		return fmt.Sprintf("terminated %s (exit %d): %s", cs.State.Terminated.Reason, cs.State.Terminated.ExitCode, cs.State.Terminated.Message)
	}
	return "unknown"
}

func ptr[T any](v T) *T { return &v }

var _ = appsv1.SchemeGroupVersion

// dynamicWorkers is the Worker resource of the samples' namespace.
func (n *node) dynamicWorkers(t interface{ Fatal(...any) }) dynamic.ResourceInterface {
	dyn, err := dynamic.NewForConfig(n.rest)
	if err != nil {
		t.Fatal(err)
	}
	return dyn.Resource(schema.GroupVersionResource{Group: fleetGroup, Version: "v1alpha1", Resource: "workers"}).Namespace(sampleNS)
}

// removeAtEnd deletes objs (foreground: their pods first) when t ends and waits until
// the pods named after them are gone: the single node's CPU is what later tests'
// pods are scheduled on.
func removeAtEnd(t *testing.T, objs []*unstructured.Unstructured) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := cluster.remove(ctx, objs); err != nil {
			t.Logf("cleanup: %v", err)
		}
	})
}

func (n *node) remove(ctx context.Context, objs []*unstructured.Unstructured) error {
	dyn, mapper, err := n.dynamic()
	if err != nil {
		return err
	}
	fg := metav1.DeletePropagationForeground
	for _, o := range objs {
		r, err := resourceFor(dyn, mapper, o)
		if err != nil {
			return err
		}
		if err := r.Delete(ctx, o.GetName(), metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	for {
		pods, err := n.client.CoreV1().Pods(sampleNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		left := 0
		for _, p := range pods.Items {
			for _, o := range objs {
				if o.GetKind() == "Worker" && strings.HasPrefix(p.Name, o.GetName()+"-") {
					left++
				}
			}
		}
		if left == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d pods of %d objects still there: %w", left, len(objs), ctx.Err())
		case <-time.After(time.Second):
		}
	}
}
