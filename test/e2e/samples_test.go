package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/controllers/cronschedule"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
)

// TestChatEventsThroughChannel: listeners on the chat sample's /events stream (server-sent
// events from the room's Durable Object, which subscribes to the room's durable channel in
// its shard's sidecar) each receive a message posted afterwards through the Service.
func TestChatEventsThroughChannel(t *testing.T) {
	url := serviceURL(t, "chat")
	// A rollout of the rooms' shards or the chat pods (an input of theirs changed) ends
	// the listeners' streams; delivery, not a rollout, is what this test is about: it
	// starts once the shards settled, and goes again, in a new room, only when a stream
	// ended while those pods were replaced.
	eventually(t, 4*time.Minute, "the rooms' shards settled", func() error {
		return statefulSetRolled(context.Background(), render.ShardSetName("rooms"), 0)
	})
	for attempt := 1; ; attempt++ {
		before := chatPodUIDs(t)
		err := chatEventsOnce(t, url, fmt.Sprintf("e2e-live-%d", attempt))
		if err == nil {
			return
		}
		if attempt < 3 && errors.Is(err, errStreamEnded) && !maps.Equal(before, chatPodUIDs(t)) {
			t.Logf("attempt %d: %v while the chat sample's pods were replaced; again in a new room", attempt, err)
			eventually(t, 4*time.Minute, "the rooms' shards settled", func() error {
				return statefulSetRolled(context.Background(), render.ShardSetName("rooms"), 0)
			})
			continue
		}
		t.Fatal(err)
	}
}

var errStreamEnded = errors.New("stream ended")

// chatEventsOnce opens two listeners on room, posts a message and checks each listener
// receives it.
func chatEventsOnce(t *testing.T, url, room string) error {
	// Two listeners; the Service spreads connections over the two chat replicas.
	var listeners []chan string
	for i := 0; i < 2; i++ {
		listeners = append(listeners, listen(t, url+"/rooms/"+room+"/events"))
	}
	body := `{"user":"grace","text":"through the channel"}`
	resp, err := httpClient.Post(url+"/rooms/"+room+"/messages", "application/json", strings.NewReader(body))
	if err != nil {
		return err
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("POST: %s %s", resp.Status, b)
	}
	var posted struct {
		Seq        int
		User, Text string
	}
	if err := json.Unmarshal(b, &posted); err != nil {
		return err
	}
	for i, l := range listeners {
		select {
		case data, ok := <-l:
			if !ok {
				return fmt.Errorf("listener %d: %w", i, errStreamEnded)
			}
			var got struct {
				Seq        int
				User, Text string
			}
			if err := json.Unmarshal([]byte(data), &got); err != nil {
				return fmt.Errorf("listener %d: %q: %v", i, data, err)
			}
			if got != posted {
				return fmt.Errorf("listener %d got %+v, want the posted %+v", i, got, posted)
			}
		case <-time.After(time.Minute): // a hang guard
			return fmt.Errorf("listener %d: no event within a minute", i)
		}
	}
	return nil
}

// chatPodUIDs maps the names of the chat sample's pods (its Worker's and its rooms'
// shards) to their UIDs, marked when the pod is terminating.
func chatPodUIDs(t *testing.T) map[string]string {
	t.Helper()
	pods := &corev1.PodList{}
	if err := k8sClient.List(context.Background(), pods, client.InNamespace(sampleNS)); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range pods.Items {
		if strings.HasPrefix(p.Name, render.ShardSetName("rooms")+"-") || p.Labels[podcontract.LabelWorker] == "chat" {
			out[p.Name] = string(p.UID)
			if p.DeletionTimestamp != nil {
				out[p.Name] += " terminating"
			}
		}
	}
	return out
}

// listen opens a server-sent event stream, waits for its ": subscribed" comment and
// returns its data lines.
func listen(t *testing.T, url string) chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	var resp *http.Response
	eventually(t, time.Minute, "GET "+url, func() (err error) {
		resp, err = (&http.Client{}).Do(req.Clone(ctx))
		if err == nil && resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			err = fmt.Errorf("%s: %s", resp.Status, b)
		}
		return err
	})
	if ct := resp.Header.Get("content-type"); ct != "text/event-stream" {
		t.Fatalf("content-type %q", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	if !sc.Scan() || sc.Text() != ": subscribed" {
		t.Fatalf("first line %q (%v), want \": subscribed\"", sc.Text(), sc.Err())
	}
	out := make(chan string, 16)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		event := ""
		for sc.Scan() {
			line := sc.Text()
			if e, ok := strings.CutPrefix(line, "event: "); ok {
				event = e
			} else if d, ok := strings.CutPrefix(line, "data: "); ok && event == "" {
				out <- d
			} else if ok {
				// Not a message (the sample ends its stream with an error event):
				// passed on as is, so the caller's check names it.
				out <- "event " + event + ": " + d
			} else if line == "" {
				event = ""
			}
		}
		if err := sc.Err(); err != nil && ctx.Err() == nil {
			out <- "the stream broke: " + err.Error()
		}
	}()
	return out
}

type orderStatus struct {
	ID     string `json:"id"`
	Status struct {
		Status string `json:"status"`
		Output *struct {
			Order      string   `json:"order"`
			Items      []string `json:"items"`
			Paid       float64  `json:"paid"`
			TrackingID string   `json:"trackingId"`
		} `json:"output"`
		Error any `json:"error"`
	} `json:"status"`
}

// TestOrderWorkflowCompletesAfterEvent: the orders sample's Workflow runs in its engine
// pod; an order created through the shop Worker reserves stock, sleeps, waits for its
// payment event, and completes only after the event is sent — with the output built
// from the params, the event payload and the instance id. status.instances counts it.
func TestOrderWorkflowCompletesAfterEvent(t *testing.T) {
	url := serviceURL(t, "shop")
	var created orderStatus
	eventually(t, time.Minute, "POST /orders", func() error {
		resp, err := httpClient.Post(url+"/orders", "application/json", strings.NewReader(`{"items":["book","pen"]}`))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusCreated {
			return fmt.Errorf("%s: %s", resp.Status, b)
		}
		return json.Unmarshal(b, &created)
	})
	if created.ID == "" {
		t.Fatalf("no instance id: %+v", created)
	}
	status := func() orderStatus {
		t.Helper()
		var s orderStatus
		body, err := get(url + "/orders/" + created.ID)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(body), &s); err != nil {
			t.Fatalf("%q: %v", body, err)
		}
		return s
	}
	// Past the step and the 3 s sleep, the instance waits for its payment: it cannot
	// complete without the event.
	eventually(t, time.Minute, "the instance waiting for its payment", func() error {
		if s := status(); s.Status.Status != "waiting" {
			return fmt.Errorf("status %+v", s.Status)
		}
		return nil
	})
	if s := status(); s.Status.Status == "complete" {
		t.Fatalf("complete before the payment event: %+v", s.Status)
	}
	resp, err := httpClient.Post(url+"/orders/"+created.ID+"/pay", "application/json", strings.NewReader(`{"amount":42}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("pay: %s %s", resp.Status, b)
	}
	var done orderStatus
	eventually(t, 2*time.Minute, "the instance complete", func() error {
		done = status()
		if done.Status.Status != "complete" {
			return fmt.Errorf("status %+v", done.Status)
		}
		return nil
	})
	o := done.Status.Output
	if o == nil || o.Order != created.ID || strings.Join(o.Items, ",") != "book,pen" || o.Paid != 42 || o.TrackingID != "TRK-"+created.ID {
		t.Errorf("output %+v, want order %s, items book,pen, paid 42, trackingId TRK-%s", o, created.ID, created.ID)
	}
	// The controller reads the engine's counts into status.instances.
	eventually(t, time.Minute, "status.instances.complete", func() error {
		wf := &fleetv1alpha1.Workflow{}
		if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: sampleNS, Name: "orders"}, wf); err != nil {
			return err
		}
		if wf.Status.Instances.Complete < 1 {
			return fmt.Errorf("status.instances %+v", wf.Status.Instances)
		}
		return nil
	})
}

// TestCronStartsWorkflow: a CronSchedule with a workflowRef target creates one instance
// of the orders Workflow per firing, with the slot's deterministic id, the target's
// params as payload, and the cron expression and scheduledTime on the instance.
func TestCronStartsWorkflow(t *testing.T) {
	ctx := context.Background()
	const expr = "* * * * *"
	cs := &fleetv1alpha1.CronSchedule{
		ObjectMeta: metav1.ObjectMeta{Namespace: sampleNS, Name: "orders-e2e"},
		Spec: fleetv1alpha1.CronScheduleSpec{
			Schedules: []string{expr},
			Target: fleetv1alpha1.CronTarget{
				WorkflowRef: &fleetv1alpha1.LocalObjectReference{Name: "orders"},
				Params:      &apiextensionsv1.JSON{Raw: []byte(`{"items":["from-cron"]}`)},
			},
		},
	}
	if err := k8sClient.Create(ctx, cs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), cs) })
	var fired fleetv1alpha1.CronEvent
	eventually(t, 3*time.Minute, "a firing recorded ok", func() error {
		if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(cs), cs); err != nil {
			return err
		}
		for _, ev := range cs.Status.History {
			if ev.Outcome == fleetv1alpha1.CronOutcomeOK {
				fired = ev
				return nil
			}
		}
		return fmt.Errorf("history %+v", cs.Status.History)
	})
	id := cronschedule.ScheduledInstanceID(expr, fired.ScheduledTime.Time)
	if !strings.Contains(fired.Message, id) {
		t.Errorf("history message %q does not name instance %s", fired.Message, id)
	}
	// Read the instance from the engine API on the engine pod's cross-pod listener, with
	// the namespace's client certificate as a Worker of the namespace would.
	pod := &corev1.Pod{}
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: sampleNS, Name: "orders-wf-0"}, pod); err != nil {
		t.Fatal(err)
	}
	cert := secretCert(t, sampleNS, podcontract.InternalTLSSecret)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		InsecureSkipVerify: true, //nolint:gosec // the test reads its own pod; only the caller is checked
		Certificates:       []tls.Certificate{*cert},
	}}}
	resp, err := hc.Get(fmt.Sprintf("https://%s:9092/workflows/orders/instances/%s", pod.Status.PodIP, id))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("engine: %s %q %v", resp.Status, raw, err)
	}
	body := string(raw)
	var in struct {
		Params      struct{ Items []string } `json:"params"`
		Schedule    string                   `json:"schedule"`
		ScheduledMs int64                    `json:"scheduledMs"`
	}
	if err := json.Unmarshal([]byte(body), &in); err != nil {
		t.Fatalf("%q: %v", body, err)
	}
	if in.Schedule != expr || in.ScheduledMs != fired.ScheduledTime.UnixMilli() || strings.Join(in.Params.Items, ",") != "from-cron" {
		t.Errorf("instance %s, want schedule %q, scheduledMs %d, params items [from-cron]", body, expr, fired.ScheduledTime.UnixMilli())
	}
}

// TestShardPodsReplaced: deleting both shard pods of the chat sample's namespace (the
// StatefulSet replaces them under the same names) brings every shard back, and the
// rooms' messages, kept in SQLite on the shards' volumes, are still there.
func TestShardPodsReplaced(t *testing.T) {
	ctx := context.Background()
	url := serviceURL(t, "chat")
	const room = "e2e-survivor"
	resp, err := httpClient.Post(url+"/rooms/"+room+"/messages", "application/json", strings.NewReader(`{"user":"ada","text":"before the restart"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST: %s", resp.Status)
	}
	old := map[string]string{}
	for _, name := range []string{"rooms-do-0", "rooms-do-1"} {
		p := &corev1.Pod{}
		if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: sampleNS, Name: name}, p); err != nil {
			t.Fatal(err)
		}
		old[name] = string(p.UID)
		if err := k8sClient.Delete(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 4*time.Minute, "both shards replaced and the namespace Ready", func() error {
		for name, uid := range old {
			p := &corev1.Pod{}
			if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: sampleNS, Name: name}, p); err != nil {
				return err
			}
			// The local cluster's view of the name (its run's UID, phase, whether it
			// is stopping) goes into the message, so a failure explains itself.
			if string(p.UID) == uid {
				return fmt.Errorf("%s not replaced yet; local cluster: %s", name, cluster.PodRunInfo(sampleNS, name))
			}
			ready := false
			for _, c := range p.Status.Conditions {
				ready = ready || (c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
			}
			if !ready {
				return fmt.Errorf("%s (%s) is %s, not Ready (conditions %+v); local cluster: %s", name, p.UID, p.Status.Phase, p.Status.Conditions, cluster.PodRunInfo(sampleNS, name))
			}
		}
		body, err := get(url + "/rooms/" + room + "/messages")
		if err != nil {
			return err
		}
		if !strings.Contains(body, "before the restart") {
			return fmt.Errorf("messages %s", body)
		}
		return nil
	})
}
