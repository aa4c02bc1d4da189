package realnode

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// serviceURL is http://<ClusterIP>:<http port> of a sample's Service.
func serviceURL(t *testing.T, name string) string {
	t.Helper()
	u, err := serviceAddr(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func post(url, body string, want int) ([]byte, error) {
	resp, err := httpClient.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		return b, fmt.Errorf("POST %s: %s: %s", url, resp.Status, b)
	}
	return b, nil
}

// TestChatRoomsAcrossShards: the chat sample's rooms live in Durable Objects on two shard
// pods, which the chat pods reach by their cluster DNS names (CoreDNS on the node):
// messages posted to several rooms are stored and read back through the Service.
func TestChatRoomsAcrossShards(t *testing.T) {
	requireNode(t)
	url := serviceURL(t, "chat")
	for i := 0; i < 6; i++ { // six rooms: both shards get some (all six on one: 1 in 32)
		room := fmt.Sprintf("realnode-%d", i)
		text := "hello room " + strconv.Itoa(i)
		eventually(t, time.Minute, "POST to "+room, func() error {
			_, err := post(url+"/rooms/"+room+"/messages", `{"user":"ada","text":"`+text+`"}`, http.StatusCreated)
			return err
		})
		body, err := get(url + "/rooms/" + room + "/messages")
		if err != nil || !strings.Contains(body, text) {
			t.Errorf("GET %s messages = %q, %v; want %q", room, body, err, text)
		}
	}
}

// TestOrderWorkflowCompletes: an order created through the shop Worker runs in the
// Workflow engine pod (a StatefulSet on a provisioned local volume), waits for its
// payment event and completes after it.
func TestOrderWorkflowCompletes(t *testing.T) {
	requireNode(t)
	url := serviceURL(t, "shop")
	var created struct {
		ID string `json:"id"`
	}
	eventually(t, time.Minute, "POST /orders", func() error {
		b, err := post(url+"/orders", `{"items":["book","pen"]}`, http.StatusCreated)
		if err != nil {
			return err
		}
		return json.Unmarshal(b, &created)
	})
	status := func() string {
		var s struct {
			Status struct {
				Status string `json:"status"`
			} `json:"status"`
		}
		b, err := get(url + "/orders/" + created.ID)
		if err == nil {
			err = json.Unmarshal([]byte(b), &s)
		}
		if err != nil {
			return err.Error()
		}
		return s.Status.Status
	}
	eventually(t, time.Minute, "the order waiting for its payment", func() error {
		if s := status(); s != "waiting" {
			return fmt.Errorf("status %s", s)
		}
		return nil
	})
	if _, err := post(url+"/orders/"+created.ID+"/pay", `{"amount":42}`, http.StatusAccepted); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "the order complete", func() error {
		if s := status(); s != "complete" {
			return fmt.Errorf("status %s", s)
		}
		return nil
	})
}
