package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/podcontract"
)

// DefaultTimeout bounds a call when Client.HTTP is nil.
const DefaultTimeout = 30 * time.Second

// maxAnswer bounds how much of an answer is read.
const maxAnswer = 64 << 20

// Client calls one engine's API. Errors the engine answers are *APIError (its status,
// code and message); others (unreachable, not JSON) name the URL.
type Client struct {
	// BaseURL is the sidecar's base URL, e.g. PodURL(<pod IP>).
	BaseURL string
	// HTTP makes the calls; nil = a client with DefaultTimeout.
	HTTP *http.Client
}

// NewClient is a Client of the sidecar at baseURL using hc (nil = DefaultTimeout).
func NewClient(baseURL string, hc *http.Client) *Client {
	return &Client{BaseURL: strings.TrimSuffix(baseURL, "/"), HTTP: hc}
}

// PodURL is the base URL of the sidecar of the pod with IP podIP (plain HTTP: a
// sidecar run by hand).
func PodURL(podIP string) string {
	return "http://" + net.JoinHostPort(podIP, strconv.Itoa(podcontract.SidecarPort))
}

// PodTLSURL is the base URL of the cross-pod listener of the sidecar of the pod with IP
// podIP (mutual TLS; docs/security-internal-plane.md).
func PodTLSURL(podIP string) string {
	return "https://" + net.JoinHostPort(podIP, strconv.Itoa(podcontract.SidecarPort))
}

// ListOptions select a page of List: only Status ("" = all), Limit per page (0 = the
// engine's 50), after Cursor (the previous page's).
type ListOptions struct {
	Status string
	Limit  int
	Cursor string
}

// Create creates an instance of workflow. An id already in use is an *APIError with
// Code CodeInstanceExists.
func (c *Client) Create(ctx context.Context, workflow string, o CreateOptions) (*Instance, error) {
	var in Instance
	return &in, c.call(ctx, http.MethodPost, workflow, "/instances", o, &in)
}

// Get returns an instance.
func (c *Client) Get(ctx context.Context, workflow, id string) (*Instance, error) {
	var in Instance
	return &in, c.call(ctx, http.MethodGet, workflow, "/instances/"+url.PathEscape(id), nil, &in)
}

// Steps returns an instance's steps, following the pages' cursors.
func (c *Client) Steps(ctx context.Context, workflow, id string) ([]Step, error) {
	var steps []Step
	cursor := ""
	for {
		var page StepPage
		path := "/instances/" + url.PathEscape(id) + "/steps?cursor=" + url.QueryEscape(cursor)
		if err := c.call(ctx, http.MethodGet, workflow, path, nil, &page); err != nil {
			return nil, err
		}
		if steps = append(steps, page.Steps...); page.Cursor == "" {
			return steps, nil
		}
		cursor = page.Cursor
	}
}

// List returns one page of workflow's instances.
func (c *Client) List(ctx context.Context, workflow string, o ListOptions) (*ListPage, error) {
	q := url.Values{}
	if o.Status != "" {
		q.Set("status", o.Status)
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Cursor != "" {
		q.Set("cursor", o.Cursor)
	}
	var page ListPage
	return &page, c.call(ctx, http.MethodGet, workflow, "/instances?"+q.Encode(), nil, &page)
}

// Stats returns workflow's counters.
func (c *Client) Stats(ctx context.Context, workflow string) (*Stats, error) {
	var s Stats
	return &s, c.call(ctx, http.MethodGet, workflow, "/stats", nil, &s)
}

// Bulk applies op ("terminate" or "delete") to up to 1000 instances; each id that
// failed is in the result's Errors.
func (c *Client) Bulk(ctx context.Context, workflow, op string, ids []string) (*BulkResult, error) {
	var out BulkResult
	return &out, c.call(ctx, http.MethodPost, workflow, "/bulk/"+url.PathEscape(op), map[string]any{"ids": ids}, &out)
}

func (c *Client) call(ctx context.Context, method, workflow, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	u := c.BaseURL + PathPrefix + url.PathEscape(workflow) + path
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: DefaultTimeout}
	}
	res, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, u, err)
	}
	if res.StatusCode >= 300 {
		var e struct {
			Error *APIError `json:"error"`
		}
		if json.Unmarshal(b, &e) == nil && e.Error != nil && e.Error.Message != "" {
			e.Error.Status = res.StatusCode
			return e.Error
		}
		return fmt.Errorf("%s %s: the engine answered %s: %.300s", method, u, res.Status, bytes.TrimSpace(b))
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s %s: the answer is not the expected JSON: %w", method, u, err)
	}
	return nil
}
