// Package versions sets a Worker's deployment the way wrangler's `versions deploy`
// and `rollback` do (docs/versions.md): the code path of the CLI's `versions` and
// `rollback` commands.
package versions

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
)

// FieldManager owns spec.deployment when these functions set it: `deploy`'s own apply
// does not take it back.
const FieldManager = "workerd-operator-versions"

// Parse parses "VERSION-ID@PERCENTAGE" arguments: one or two, adding up to 100.
func Parse(args []string) ([]fleetv1alpha1.DeploymentVersion, error) {
	if len(args) < 1 || len(args) > 2 {
		return nil, fmt.Errorf("deploy: one or two VERSION-ID@PERCENTAGE, not %d (docs/versions.md)", len(args))
	}
	var out []fleetv1alpha1.DeploymentVersion
	var sum int32
	for _, a := range args {
		id, pct, ok := strings.Cut(a, "@")
		n, err := strconv.ParseInt(pct, 10, 32)
		if !ok || id == "" || err != nil || n < 0 || n > 100 {
			return nil, fmt.Errorf("deploy: %q: want VERSION-ID@PERCENTAGE, a percentage from 0 to 100 (docs/versions.md)", a)
		}
		out = append(out, fleetv1alpha1.DeploymentVersion{VersionID: id, Percentage: int32(n)})
		sum += int32(n)
	}
	if sum != 100 {
		return nil, fmt.Errorf("deploy: the percentages add up to %d, not 100 (docs/versions.md)", sum)
	}
	return out, nil
}

// Deploy sets Worker ns/name's spec.deployment to versions.
func Deploy(ctx context.Context, c client.Client, ns, name string, versions []fleetv1alpha1.DeploymentVersion) error {
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"deployment": fleetv1alpha1.WorkerDeployment{Versions: versions}}})
	if err != nil {
		return err
	}
	w := &fleetv1alpha1.Worker{}
	w.Namespace, w.Name = ns, name
	if err := c.Patch(ctx, w, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(FieldManager)); err != nil {
		return fmt.Errorf("Worker %s/%s: %w", ns, name, err)
	}
	return nil
}

// Rollback deploys version id at 100 percent or, when id is "", the Worker's
// deployment before this one (status.previousDeployment); it returns what it deployed.
func Rollback(ctx context.Context, c client.Client, ns, name, id string) ([]fleetv1alpha1.DeploymentVersion, error) {
	to := []fleetv1alpha1.DeploymentVersion{{VersionID: id, Percentage: 100}}
	if id == "" {
		w := &fleetv1alpha1.Worker{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, w); err != nil {
			return nil, fmt.Errorf("Worker %s/%s: %w", ns, name, err)
		}
		if len(w.Status.PreviousDeployment) == 0 {
			return nil, fmt.Errorf("rollback: Worker %s/%s has no deployment before this one (status.previousDeployment): name a version (workerd-operator versions list %s)", ns, name, name)
		}
		to = w.Status.PreviousDeployment
	}
	return to, Deploy(ctx, c, ns, name, to)
}

// String words a deployment: "id@90% id@10%".
func String(versions []fleetv1alpha1.DeploymentVersion) string {
	parts := make([]string, len(versions))
	for i, v := range versions {
		parts[i] = fmt.Sprintf("%s@%d%%", v.VersionID, v.Percentage)
	}
	return strings.Join(parts, " ")
}
