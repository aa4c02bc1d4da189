package e2e

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/deploy"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// deployed is a project that `workerd-operator deploy` put on the cluster.
type deployed struct {
	// url reaches the Worker's Service from the test.
	url string
	// dir is the project's copy, built by its own deploy path.
	dir string
	res *deploy.Result
}

// deployTemplate is `workerd-operator deploy` of a clean copy of the template name of
// ../shared/testdata/cloudflare-templates (never edited) to the dev cluster, pushing to
// its registry; it returns the Worker's URL once every object is Ready.
func deployTemplate(t *testing.T, name string) string {
	t.Helper()
	return deployShared(t, name).url
}

// deployShared is deployTemplate, returning the project and what was deployed.
func deployShared(t *testing.T, name string, opts ...func(*deploy.Options)) deployed {
	t.Helper()
	src := testenv.SharedFile(t, "testdata", "cloudflare-templates", name)
	dir, err := testenv.CopyProject(src, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := deploy.NodeDir(); err != nil {
		t.Skipf("the project is not built: %v", err)
	}
	return deployDir(t, dir, opts...)
}

// deployDir runs the deploy command's own code path (deploy.Run) on the project in dir.
func deployDir(t *testing.T, dir string, opts ...func(*deploy.Options)) deployed {
	t.Helper()
	o := deploy.Options{Dir: dir, Namespace: sampleNS, Rest: cluster.RestConfig(), Scratch: t.TempDir(),
		Image: cluster.RegistryHost() + "/e2e/" + deploy.RepositoryName(dir), Timeout: 5 * time.Minute, Log: progressLog{t}}
	for _, opt := range opts {
		opt(&o)
	}
	start := time.Now()
	res, err := deploy.Run(context.Background(), o)
	if res != nil {
		t.Cleanup(func() {
			for _, u := range res.Objects {
				_ = k8sClient.Delete(context.Background(), u)
			}
		})
	}
	if errors.Is(err, testenv.ErrNoNode) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("deployed %s in %s: %s", res.Import.Worker.Name, time.Since(start).Round(time.Second), res.URL)
	return deployed{url: res.URL, dir: dir, res: res}
}

// progressLog passes deploy's own progress lines to the test log, not the build's
// output (a failing command's error carries its tail).
type progressLog struct{ t *testing.T }

func (l progressLog) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		if strings.HasPrefix(line, "deploy:") {
			l.t.Log(line)
		}
	}
	return len(p), nil
}
