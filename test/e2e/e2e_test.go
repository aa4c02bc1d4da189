// Package e2e runs the end-to-end suite on the local cluster (internal/devcluster): a
// real control plane, pods as real processes (workerd and the operator), the operator
// installed from the install bundle the way users install it, and the samples applied.
package e2e

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/workerd-operator/workerd-operator/internal/devcluster"
	"github.com/workerd-operator/workerd-operator/internal/installer"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
	"github.com/workerd-operator/workerd-operator/internal/toolchain"
)

var (
	cluster   *devcluster.Cluster
	k8sClient client.Client
	// suiteImageMapping maps the suite's images to the local binaries its pods run.
	suiteImageMapping *devcluster.ImageMapping
	repoRoot          string
	sampleNS          = "default"
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	flag.Parse()
	// The suite's own client logs nothing worth reading; without a logger controller-runtime
	// prints a warning with a stack trace after 30 s.
	ctrllog.SetLogger(logr.Discard())
	if testing.Short() {
		fmt.Println("e2e: skipped in -short mode")
		return 0
	}
	var err error
	if repoRoot, err = testenv.RepoRoot(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	release, err := testenv.HoldMachine("test/e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer release()
	dir, err := os.MkdirTemp("", "workerd-operator-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()

	// The second workerd release the rollout test moves a Worker to: installed before
	// the cluster starts, not while its pods wait.
	if _, err := toolchain.WorkerdAt(testenv.OtherWorkerdVersion); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	// Beside the run directory, which the cluster empties at start.
	defer os.RemoveAll(dir + "-images")
	images, err := suiteImages(dir + "-images")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: images:", err)
		return 1
	}
	suiteImageMapping = images
	cluster, err = devcluster.Start(ctx, devcluster.Config{Dir: dir, Images: images, Log: os.Stderr, Registry: "127.0.0.1:0"})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: local cluster:", err)
		return 1
	}
	defer func() { _ = cluster.Stop() }()
	if k8sClient, err = client.New(cluster.RestConfig(), client.Options{Scheme: testenv.Scheme()}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := install(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		dumpLogs(dir)
		return 1
	}
	code := m.Run()
	if code != 0 {
		dumpLogs(dir)
	}
	return code
}

// install applies the install bundle, waits for the manager, then applies the samples
// and waits until every one is Ready — what `make dev` does.
func install(ctx context.Context) error {
	objs, err := bundleObjects()
	if err != nil {
		return err
	}
	if err := cluster.Apply(ctx, objs, 5*time.Minute); err != nil {
		return fmt.Errorf("apply install bundle: %w", err)
	}
	if err := cluster.WaitReady(ctx, objs, 5*time.Minute); err != nil {
		return fmt.Errorf("operator not ready: %w", err)
	}
	samples, err := devcluster.ReadManifests(filepath.Join(repoRoot, "config", "samples"))
	if err != nil {
		return err
	}
	for _, s := range samples {
		if s.GetNamespace() == "" {
			s.SetNamespace(sampleNS)
		}
	}
	if err := cluster.Apply(ctx, samples, 5*time.Minute); err != nil {
		return fmt.Errorf("apply samples: %w", err)
	}
	if err := cluster.WaitReady(ctx, samples, 10*time.Minute); err != nil {
		return fmt.Errorf("samples not ready: %w", err)
	}
	return nil
}

// bundleObjects is the install bundle's objects, pointed at the local cluster
// (devcluster LocalizeInstall: the outbound default allows its Pod and Service CIDRs).
func bundleObjects() ([]*unstructured.Unstructured, error) {
	bundle, err := installer.Build(repoRoot, "", "")
	if err != nil {
		return nil, err
	}
	objs, err := decodeAll(bundle)
	if err != nil {
		return nil, err
	}
	if err := managerArgs(objs); err != nil {
		return nil, err
	}
	return objs, cluster.LocalizeInstall(objs)
}

func decodeAll(b []byte) ([]*unstructured.Unstructured, error) {
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if err == io.EOF {
				return out, nil
			}
			return nil, err
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// dumpLogs prints the tail of the operator's and the control plane's logs on failure.
func dumpLogs(dir string) {
	files, _ := filepath.Glob(filepath.Join(dir, "pods", "*", "logs", "*"))
	more, _ := filepath.Glob(filepath.Join(dir, "logs", "*"))
	for _, f := range append(files, more...) {
		b, err := os.ReadFile(f)
		if err != nil || len(b) == 0 {
			continue
		}
		if len(b) > 4000 {
			b = b[len(b)-4000:]
		}
		fmt.Fprintf(os.Stderr, "==> %s <==\n%s\n", f, b)
	}
}

var httpClient = &http.Client{Timeout: 5 * time.Second}

// get returns the body of a GET, or an error for a transport failure or a non-200.
func get(url string) (string, error) { return getWith(httpClient, url) }

// getWith is get with client hc.
func getWith(hc *http.Client, url string) (string, error) {
	resp, err := hc.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(b)))
	}
	return string(b), nil
}

// eventually polls cond until it returns nil or the deadline passes.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = cond(); err == nil {
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("%s: %v", what, err)
}
