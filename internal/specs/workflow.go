package specs

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/workflows/api"
	"github.com/workerd-operator/workerd-operator/internal/workflows/duration"
)

// EngineConfigFile is the engine sidecar's config (internal/workflows/api
// FileConfig), a key of the engine's rendered ConfigMap, read at podcontract.ConfigDir/<file>.
const EngineConfigFile = "workflows.json"

func workflowOwnerRef(wf *fleetv1alpha1.Workflow) metav1.OwnerReference {
	return *metav1.NewControllerRef(wf, fleetv1alpha1.GroupVersion.WithKind("Workflow"))
}

func workflowLabels(wf *fleetv1alpha1.Workflow) map[string]string {
	return commonLabels(podcontract.ComponentWorkflowEngine, podcontract.LabelWorkflow, wf.Name)
}

// EngineConfig is the engine sidecar's config for wf (docs/workflows.md "Wiring"):
// spec.limits.steps, spec.concurrency.limit, spec.retention and spec.defaults, with
// durations in milliseconds. The runner URL comes by flag (--workflows-runner-url).
// Errors name the spec field whose duration does not parse.
func EngineConfig(wf *fleetv1alpha1.Workflow) (api.FileConfig, error) {
	c := api.WorkflowConfig{Name: wf.Name}
	s := wf.Spec
	if s.Limits != nil && s.Limits.Steps != nil {
		c.Steps = int(*s.Limits.Steps)
	}
	if s.Concurrency != nil && s.Concurrency.Limit != nil {
		c.Concurrency = int(*s.Concurrency.Limit)
	}
	var err error
	ms := func(field, v string, into *int64) {
		if v == "" || err != nil {
			return
		}
		if *into, err = duration.Parse(v); err != nil {
			err = fmt.Errorf("%s: %w", field, err)
		}
	}
	if r := s.Retention; r != nil {
		ms("spec.retention.success", r.Success, &c.SuccessRetentionMs)
		ms("spec.retention.error", r.Error, &c.ErrorRetentionMs)
	}
	if d := s.Defaults; d != nil {
		sd := &api.StepDefaults{}
		if r := d.Retries; r != nil {
			if r.Limit != nil {
				sd.Limit = new(int)
				*sd.Limit = int(*r.Limit)
			}
			if r.Delay != "" {
				sd.DelayMs = new(int64)
				ms("spec.defaults.retries.delay", r.Delay, sd.DelayMs)
			}
			sd.Backoff = string(r.Backoff)
		}
		if d.Timeout != "" {
			sd.TimeoutMs = new(int64)
			ms("spec.defaults.timeout", d.Timeout, sd.TimeoutMs)
		}
		c.Defaults = sd
	}
	if err != nil {
		return api.FileConfig{}, err
	}
	return api.FileConfig{Workflows: []api.WorkflowConfig{c}}, nil
}

// BuildWorkflowChildren builds the engine of Workflow wf, whose class lives in Worker w:
// a ConfigMap (the engine pods' rendered config, from render.Render with
// Input.WorkflowHosts = [wf], plus EngineConfigFile), a one-pod StatefulSet with a PVC
// holding the instance store (the sidecar's data dir), a headless Service on the
// sidecar port (the engine API of docs/workflows.md) and the pod's NetworkPolicy. The
// pod is the Worker pod with the `workflows` socket (WorkflowEngineArgs) and the
// sidecar started with --workflows-config. Pure: no API calls.
func BuildWorkflowChildren(wf *fleetv1alpha1.Workflow, w *fleetv1alpha1.Worker, out *render.Output, engine api.FileConfig, inputsHash string, opts Options) (ShardSet, error) {
	raw, err := json.MarshalIndent(engine, "", "  ")
	if err != nil {
		return ShardSet{}, err
	}
	var storage *fleetv1alpha1.StorageSpec
	if e := wf.Spec.Engine; e != nil {
		storage = e.Storage
	}
	return buildShardSet(w, out, inputsHash, opts, shardSetParams{
		name: render.EngineSetName(wf.Name), namespace: wf.Namespace,
		labels: workflowLabels(wf), selector: WorkflowSelector(wf.Name), owner: workflowOwnerRef(wf),
		replicas: 1, storage: storage,
		port: corev1.ServicePort{
			Name: podcontract.SidecarContainer, Port: podcontract.SidecarPort,
			TargetPort: intstr.FromString(podcontract.SidecarContainer), Protocol: corev1.ProtocolTCP,
		},
		workerdArgs: append(render.Args(w), render.WorkflowEngineArgs()...),
		sidecarArgs: []string{
			"--workflows-config=" + podcontract.ConfigDir + "/" + EngineConfigFile,
			fmt.Sprintf("--workflows-runner-url=http://%s:%d", podcontract.LoopbackHost, podcontract.RunnerPort),
		},
		sidecarConfig: true,
		backup:        WorkflowBackup(wf),
		extraFiles:    []render.File{{Key: EngineConfigFile, Path: EngineConfigFile, Data: append(raw, '\n')}},
	}), nil
}

// WorkflowBackup is wf's spec.engine.backup and spec.engine.restore as its engine pod
// needs them.
func WorkflowBackup(wf *fleetv1alpha1.Workflow) StoreBackup {
	bk := StoreBackup{Path: wf.BackupPath(), Shards: 1, Engine: true}
	if e := wf.Spec.Engine; e != nil {
		bk.Backup, bk.Restore = e.Backup, e.Restore
	}
	return bk
}
