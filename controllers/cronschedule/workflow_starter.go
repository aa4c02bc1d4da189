package cronschedule

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/workerd-operator/workerd-operator/controllers/common"
	"github.com/workerd-operator/workerd-operator/internal/internalca"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/specs"
	"github.com/workerd-operator/workerd-operator/internal/workflows/api"
)

// EngineStarter is the dispatcher's WorkflowStarter: it creates Workflow instances by
// POSTing to the engine API of the Workflow's ready engine pod (docs/workflows.md).
type EngineStarter struct {
	// Client lists the engine pods (the manager's cached client).
	Client client.Reader
	// HTTP calls the engine; default a client with a 30 s timeout.
	HTTP *http.Client
	// Issuer, when set, makes the calls mutual TLS with the manager's certificate (the
	// manager sets it); without it they are plain HTTP on HTTP.
	Issuer *internalca.Issuer
}

// ScheduledInstanceID is the instance id of the firing of cron at scheduledTime:
// "cron-<8 hex of sha256(cron)>-<unix seconds>". It is the same on every attempt, so a
// retried creation finds the instance instead of making a second one.
func ScheduledInstanceID(cron string, scheduledTime time.Time) string {
	h := sha256.Sum256([]byte(cron))
	return fmt.Sprintf("cron-%s-%d", hex.EncodeToString(h[:4]), scheduledTime.Unix())
}

// StartScheduled creates the instance ScheduledInstanceID(cron, scheduledTime) of
// Workflow workflow in namespace with params as its event payload, event.schedule = cron
// and event.timestamp = scheduledTime. An instance already created for that slot counts
// as started. Errors: the Workflow has no ready engine pod; the engine refused (its
// message).
func (s *EngineStarter) StartScheduled(ctx context.Context, namespace, workflow string, params *apiextensionsv1.JSON, cron string, scheduledTime time.Time) (string, error) {
	pods, err := common.ListPods(ctx, s.Client, namespace, specs.WorkflowSelector(workflow))
	if err != nil {
		return "", err
	}
	var ip string
	if ready := common.ReadyPods(pods); len(ready) > 0 {
		ip = ready[0].Status.PodIP
	}
	if ip == "" {
		return "", fmt.Errorf("no ready engine pod (%s-0) for Workflow %q; see kubectl get workflow %s", render.EngineSetName(workflow), workflow, workflow)
	}
	id := ScheduledInstanceID(cron, scheduledTime)
	o := api.CreateOptions{ID: id, Schedule: cron, ScheduledMs: scheduledTime.UnixMilli()}
	if params != nil && len(params.Raw) > 0 {
		o.Params = json.RawMessage(params.Raw)
	}
	c, err := engineClient(ctx, s.Issuer, s.HTTP, namespace, ip, 30*time.Second)
	if err != nil {
		return "", err
	}
	_, err = c.Create(ctx, workflow, o)
	var ae *api.APIError
	switch {
	case err == nil:
		return id, nil
	case errors.As(err, &ae) && ae.Code == api.CodeInstanceExists:
		return id, nil // created by an earlier attempt for this slot
	case ae != nil:
		return "", fmt.Errorf("engine: %s (%s)", ae.Message, ae.Code)
	}
	return "", fmt.Errorf("engine: %w", err)
}

// engineClient is a client of the engine API of the pod at ip in namespace ns: over
// mutual TLS with the manager's certificate when is is set, else plain HTTP on hc.
func engineClient(ctx context.Context, is *internalca.Issuer, hc *http.Client, ns, ip string, timeout time.Duration) (*api.Client, error) {
	if is == nil {
		return api.NewClient(api.PodURL(ip), hc), nil
	}
	tc, err := is.HTTPClient(ctx, ns, timeout)
	if err != nil {
		return nil, err
	}
	return api.NewClient(api.PodTLSURL(ip), tc), nil
}
