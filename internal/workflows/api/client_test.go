package api_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/workerd-operator/workerd-operator/internal/workflows"
	"github.com/workerd-operator/workerd-operator/internal/workflows/api"
)

// Client against the engine's handler (the runner is unreachable: no instance ends).
func TestClient(t *testing.T) {
	e, err := workflows.New(workflows.Options{DataDir: t.TempDir(), RunnerURL: "http://127.0.0.1:9", Workflows: []api.WorkflowConfig{{Name: "orders", Concurrency: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	srv := httptest.NewServer(e.Handler())
	t.Cleanup(srv.Close)
	ctx := context.Background()
	c := api.NewClient(srv.URL+"/", nil)

	in, err := c.Create(ctx, "orders", api.CreateOptions{ID: "a1", Params: []byte(`{"n":1}`), Schedule: "* * * * *", ScheduledMs: 1000})
	if err != nil || in.ID != "a1" || in.Status != api.StatusQueued || in.Schedule != "* * * * *" {
		t.Fatalf("Create = %+v, %v", in, err)
	}
	var ae *api.APIError
	if _, err := c.Create(ctx, "orders", api.CreateOptions{ID: "a1"}); !errors.As(err, &ae) || ae.Code != api.CodeInstanceExists || ae.Status != http.StatusConflict {
		t.Errorf("second Create: %v, want *APIError %s 409", err, api.CodeInstanceExists)
	}
	if _, err := c.Get(ctx, "orders", "nope"); !errors.As(err, &ae) || ae.Code != "instance.not_found" || ae.Status != http.StatusNotFound {
		t.Errorf("Get(nope): %v, want instance.not_found 404", err)
	}
	if _, err := c.Create(ctx, "orders", api.CreateOptions{ID: "a2"}); err != nil {
		t.Fatal(err)
	}
	page, err := c.List(ctx, "orders", api.ListOptions{Limit: 1})
	if err != nil || len(page.Instances) != 1 || page.Cursor != "a1" {
		t.Errorf("List limit 1 = %+v, %v; want a1 and cursor a1", page, err)
	}
	if s, err := c.Stats(ctx, "orders"); err != nil || s.Counts[api.StatusQueued]+s.Counts[api.StatusRunning] != 2 {
		t.Errorf("Stats = %+v, %v; want 2 queued or running", s, err)
	}
	res, err := c.Bulk(ctx, "orders", "terminate", []string{"a1", "nope"})
	if err != nil || len(res.Done) != 1 || len(res.Errors) != 1 || res.Errors[0].Code != "instance.not_found" {
		t.Errorf("Bulk = %+v, %v", res, err)
	}
	if steps, err := c.Steps(ctx, "orders", "a1"); err != nil || len(steps) != 0 {
		t.Errorf("Steps = %v, %v", steps, err)
	}
	if _, err := api.NewClient("http://127.0.0.1:9", nil).Stats(ctx, "orders"); err == nil || errors.As(err, &ae) {
		t.Errorf("unreachable engine: %v, want a plain error", err)
	}
	if _, err := api.NewClient(srv.URL, nil).Stats(ctx, "nope"); !errors.As(err, &ae) || !strings.Contains(ae.Message, "not served") {
		t.Errorf("unknown workflow: %v", err)
	}
}
