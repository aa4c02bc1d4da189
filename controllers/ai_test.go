package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// TestWorkerAISecret: an ai binding's Secret is a reference like any other (docs/ai.md):
// missing, the Worker is not rendered and says so; present, its url, apiKey and models
// reach the sidecar only, as env; changed, the pods roll.
func TestWorkerAISecret(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	w := workerFixture(ns, "chat", func(w *fleetv1alpha1.Worker) {
		w.Spec.Bindings = append(w.Spec.Bindings, fleetv1alpha1.Binding{Name: "AI", AI: &fleetv1alpha1.AIBinding{
			SecretRef: fleetv1alpha1.LocalObjectReference{Name: "workers-ai"}}})
	})
	if err := k8sClient.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(w)
	eventually(t, "Ready=False naming the missing Secret", func() error {
		c := meta.FindStatusCondition(getWorker(t, key).Status.Conditions, fleetv1alpha1.ConditionReady)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != fleetv1alpha1.ReasonSecretNotFound || !strings.Contains(c.Message, `"workers-ai"`) {
			return fmt.Errorf("Ready condition %+v", c)
		}
		return nil
	})
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "workers-ai"}, StringData: map[string]string{"url": "http://llm:8080/v1"}}
	if err := k8sClient.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	var inputs string
	eventually(t, "the sidecar gets the Secret's keys", func() error {
		dep, err := getDeployment(key)
		if err != nil {
			return err
		}
		inputs = dep.Spec.Template.Annotations[podcontract.AnnotationInputs]
		keys := map[string]bool{}
		for _, c := range dep.Spec.Template.Spec.InitContainers {
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == "workers-ai" {
					keys[c.Name+"/"+e.ValueFrom.SecretKeyRef.Key] = true
				}
			}
		}
		for _, c := range dep.Spec.Template.Spec.Containers {
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == "workers-ai" {
					return fmt.Errorf("container %s reads the Secret's %s", c.Name, e.ValueFrom.SecretKeyRef.Key)
				}
			}
		}
		for _, k := range []string{"url", "apiKey", "models"} {
			if !keys[podcontract.SidecarContainer+"/"+k] {
				return fmt.Errorf("sidecar env lacks the Secret's %s: %v", k, keys)
			}
		}
		return nil
	})
	secret.StringData = map[string]string{"url": "http://llm-2:8080/v1"}
	if err := k8sClient.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a change of the Secret rolls the pods", func() error {
		dep, err := getDeployment(key)
		if err != nil {
			return err
		}
		if dep.Spec.Template.Annotations[podcontract.AnnotationInputs] == inputs {
			return fmt.Errorf("inputs annotation unchanged")
		}
		return nil
	})
}
