package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
)

// TestChatRoomsAcrossShards: the chat sample's rooms live on a DurableObjectNamespace
// sharded over two pods. Messages posted through either Worker replica land in the one
// shard that owns the room; each room's SQLite file exists on exactly one shard.
func TestChatRoomsAcrossShards(t *testing.T) {
	url := serviceURL(t, "chat")
	const rooms, perRoom = 20, 3
	for r := 0; r < rooms; r++ {
		for m := 1; m <= perRoom; m++ {
			body := fmt.Sprintf(`{"user":"e2e","text":"room %d message %d"}`, r, m)
			eventually(t, 30*time.Second, "post", func() error {
				resp, err := httpClient.Post(fmt.Sprintf("%s/rooms/e2e-%d/messages", url, r), "application/json", strings.NewReader(body))
				if err != nil {
					return err
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated {
					return fmt.Errorf("POST: %s", resp.Status)
				}
				return nil
			})
		}
	}
	for r := 0; r < rooms; r++ {
		body, err := get(fmt.Sprintf("%s/rooms/e2e-%d/messages", url, r))
		if err != nil {
			t.Fatal(err)
		}
		var msgs []struct {
			Seq  int    `json:"seq"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal([]byte(body), &msgs); err != nil {
			t.Fatalf("room %d: %v: %s", r, err, body)
		}
		if len(msgs) != perRoom {
			t.Fatalf("room %d holds %d messages, want %d: %s", r, len(msgs), perRoom, body)
		}
		for i, m := range msgs {
			if want := fmt.Sprintf("room %d message %d", r, i+1); m.Seq != i+1 || m.Text != want {
				t.Errorf("room %d message %d = %+v, want seq %d %q", r, i, m, i+1, want)
			}
		}
	}

	// Each object's SQLite file is on exactly one shard's volume.
	owners := map[string][]string{}
	for _, shard := range []string{"rooms-do-0", "rooms-do-1"} {
		vol := pvcDir(t, shard)
		files, _ := filepath.Glob(filepath.Join(vol, "do", "*", "*.sqlite"))
		for _, f := range files {
			if filepath.Base(f) != "metadata.sqlite" {
				owners[filepath.Base(f)] = append(owners[filepath.Base(f)], shard)
			}
		}
	}
	if len(owners) < rooms {
		t.Errorf("%d object files on the shards, want at least %d rooms", len(owners), rooms)
	}
	perShard := map[string]int{}
	for id, shards := range owners {
		if len(shards) != 1 {
			t.Errorf("object %s stored on %v: want exactly one shard", id, shards)
		}
		perShard[shards[0]]++
	}
	if perShard["rooms-do-0"] == 0 || perShard["rooms-do-1"] == 0 {
		t.Errorf("objects per shard %v: want both shards used", perShard)
	}
	t.Logf("objects per shard: %v", perShard)
}

// pvcDir is the host directory of the shard's PersistentVolumeClaim "data-<pod>", as
// bound by the local cluster's provisioner (a hostPath PersistentVolume).
func pvcDir(t *testing.T, pod string) string {
	t.Helper()
	ctx := context.Background()
	pvc, err := cluster.Client().CoreV1().PersistentVolumeClaims(sampleNS).Get(ctx, "data-"+pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv, err := cluster.Client().CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil || pv.Spec.HostPath == nil {
		t.Fatalf("volume of %s: %v", pod, err)
	}
	return pv.Spec.HostPath.Path
}

// TestCronFiresTicker: the ticker CronSchedule fires the Worker's scheduled() handler
// once per minute; the history records the slot with outcome ok.
func TestCronFiresTicker(t *testing.T) {
	cs := &fleetv1alpha1.CronSchedule{}
	eventually(t, 3*time.Minute, "a recorded ok firing", func() error {
		if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: sampleNS, Name: "ticker"}, cs); err != nil {
			return err
		}
		for _, ev := range cs.Status.History {
			if ev.Cron == "* * * * *" && ev.Outcome == fleetv1alpha1.CronOutcomeOK {
				if ev.ScheduledTime.Second() != 0 {
					return fmt.Errorf("scheduledTime %s is not on a minute", ev.ScheduledTime)
				}
				return nil
			}
		}
		return fmt.Errorf("history %+v", cs.Status.History)
	})
	seen := map[time.Time]int{}
	for _, ev := range cs.Status.History {
		seen[ev.ScheduledTime.Time]++
	}
	for slot, n := range seen {
		if n != 1 {
			t.Errorf("slot %s recorded %d times, want once", slot, n)
		}
	}
}
