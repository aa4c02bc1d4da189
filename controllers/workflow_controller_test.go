package controller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/specs"
	"github.com/workerd-operator/workerd-operator/internal/workflows/api"
)

const orderModule = `import { WorkflowEntrypoint } from "cloudflare:workers";
export class OrderWorkflow extends WorkflowEntrypoint { async run(event, step) { return step.do("a", async () => 1) } }
export default { async fetch(req, env) { return Response.json(await env.ORDERS.create()) } }`

func orderWorker(ns, name, workflow string) *fleetv1alpha1.Worker {
	return workerFixture(ns, name, func(w *fleetv1alpha1.Worker) {
		w.Spec.Source.Inline.Modules[0].Content = ptr.To(orderModule)
		w.Spec.Bindings = []fleetv1alpha1.Binding{{Name: "ORDERS", Workflow: &fleetv1alpha1.LocalObjectReference{Name: workflow}}}
	})
}

func workflowFixture(ns, name, worker string) *fleetv1alpha1.Workflow {
	return &fleetv1alpha1.Workflow{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: fleetv1alpha1.WorkflowSpec{
			WorkerRef: fleetv1alpha1.LocalObjectReference{Name: worker}, ClassName: "OrderWorkflow",
			Limits:      &fleetv1alpha1.WorkflowLimits{Steps: ptr.To[int32](100)},
			Concurrency: &fleetv1alpha1.WorkflowConcurrency{Limit: ptr.To[int32](5)},
			Defaults: &fleetv1alpha1.StepDefaults{
				Retries: &fleetv1alpha1.StepRetries{Limit: ptr.To[int32](2), Delay: "2 seconds", Backoff: fleetv1alpha1.BackoffLinear},
				Timeout: "1 minute",
			},
		},
	}
}

// A Worker binding a Workflow that does not exist yet waits (ReferenceNotFound); once
// the Workflow exists, the engine StatefulSet/Service/ConfigMap appear and the Worker's
// binding points at the engine's sidecar.
func TestWorkflowEngine(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	w := orderWorker(ns, "shop", "orders")
	if err := k8sClient.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	wkey := client.ObjectKeyFromObject(w)
	eventually(t, "Worker blocked on the missing Workflow", func() error {
		c := meta.FindStatusCondition(getWorker(t, wkey).Status.Conditions, fleetv1alpha1.ConditionReady)
		if c == nil || c.Reason != fleetv1alpha1.ReasonReferenceNotFound || !strings.Contains(c.Message, `Workflow "orders" not found`) {
			return fmt.Errorf("Ready = %+v", c)
		}
		return nil
	})

	wf := workflowFixture(ns, "orders", "shop")
	if err := k8sClient.Create(ctx, wf); err != nil {
		t.Fatal(err)
	}
	set := render.EngineSetName(wf.Name)
	sts := &appsv1.StatefulSet{}
	eventually(t, "engine statefulset", func() error {
		return k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: set}, sts)
	})
	if !metav1.IsControlledBy(sts, wf) || *sts.Spec.Replicas != 1 || sts.Spec.ServiceName != set || len(sts.Spec.VolumeClaimTemplates) != 1 {
		t.Fatalf("statefulset %+v", sts.Spec)
	}
	pod := sts.Spec.Template.Spec
	var wd, sc *corev1.Container
	for i := range pod.Containers {
		if pod.Containers[i].Name == "workerd" {
			wd = &pod.Containers[i]
		}
	}
	for i := range pod.InitContainers {
		if pod.InitContainers[i].Name == "sidecar" {
			sc = &pod.InitContainers[i]
		}
	}
	if wd == nil || sc == nil {
		t.Fatalf("containers %+v / %+v", pod.Containers, pod.InitContainers)
	}
	if args := strings.Join(wd.Args, " "); !strings.Contains(args, "--socket-addr=workflows=127.0.0.1:9094") {
		t.Errorf("workerd args %q lack the workflows socket on the loopback", args)
	}
	args := strings.Join(sc.Args, " ")
	for _, want := range []string{"--workflows-config=/etc/workerd/workflows.json", "--workflows-runner-url=http://127.0.0.1:9094"} {
		if !strings.Contains(args, want) {
			t.Errorf("sidecar args %q lack %q", args, want)
		}
	}
	svc := &corev1.Service{}
	if err := k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: set}, svc); err != nil {
		t.Fatal(err)
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != podcontract.SidecarPort {
		t.Errorf("service %+v", svc.Spec)
	}

	// The engine's config is the Workflow's spec in the sidecar's units (ms).
	var cmName string
	for _, v := range pod.Volumes {
		if v.Name == "config" {
			cmName = v.ConfigMap.Name
		}
	}
	cm := &corev1.ConfigMap{}
	if err := k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: cmName}, cm); err != nil {
		t.Fatal(err)
	}
	var got api.FileConfig
	if err := json.Unmarshal([]byte(cm.Data[specs.EngineConfigFile]), &got); err != nil {
		t.Fatalf("%s: %v\n%s", specs.EngineConfigFile, err, cm.Data[specs.EngineConfigFile])
	}
	c := got.Workflows[0]
	d := c.Defaults
	if len(got.Workflows) != 1 || c.Name != "orders" || c.Steps != 100 || c.Concurrency != 5 || d == nil ||
		*d.Limit != 2 || *d.DelayMs != 2000 || d.Backoff != "linear" || *d.TimeoutMs != 60000 {
		t.Errorf("engine config %s", cm.Data[specs.EngineConfigFile])
	}
	if !strings.Contains(cm.Data[podcontract.ConfigFile], `(name = "orders", service = (name = "shop", entrypoint = "OrderWorkflow"))`) {
		t.Errorf("engine config.capnp does not bind the runner to OrderWorkflow:\n%s", cm.Data[podcontract.ConfigFile])
	}

	// The Worker renders now, its binding aimed at the engine's sidecar.
	addr := render.WorkflowTargetFor(ns, "orders", render.Options{}).Address
	if want := fmt.Sprintf("orders-wf-0.orders-wf.%s.svc.cluster.local:9092", ns); addr != want {
		t.Fatalf("engine address %s, want %s", addr, want)
	}
	eventually(t, "Worker config with the workflow binding", func() error {
		list := &corev1.ConfigMapList{}
		if err := k8sClient.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{podcontract.LabelWorker: "shop"}); err != nil {
			return err
		}
		for _, cm := range list.Items {
			if strings.Contains(cm.Data[podcontract.ConfigFile], addr) {
				return nil
			}
		}
		return fmt.Errorf("no Worker ConfigMap names %s", addr)
	})

	// A second engine shard is refused with the field named.
	eventually(t, "shards 2 blocked", func() error {
		cur := &fleetv1alpha1.Workflow{}
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(wf), cur); err != nil {
			return err
		}
		if cur.Spec.Engine == nil {
			cur.Spec.Engine = &fleetv1alpha1.WorkflowEngineSpec{Shards: ptr.To[int32](2)}
			if err := k8sClient.Update(ctx, cur); err != nil {
				return err
			}
		}
		c := meta.FindStatusCondition(cur.Status.Conditions, fleetv1alpha1.ConditionReady)
		if c == nil || c.Reason != fleetv1alpha1.ReasonInvalidSpec || !strings.Contains(c.Message, "spec.engine.shards: 2 is not supported yet") {
			return fmt.Errorf("Ready = %+v", c)
		}
		return nil
	})
}
