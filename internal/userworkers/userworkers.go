// Package userworkers serves Shared user Workers' code (spec.dispatchPlacement Shared)
// from the manager to the sidecars of their dispatch Workers' pods, which load each as
// an isolate with workerd's workerLoader (docs/dispatch.md). The manager answers on its
// internal API (podcontract.ContainersAPIPort), over mutual TLS with the caller's
// namespace certificate: a sidecar reads only Workers of its own namespace.
package userworkers

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/render"
)

// Path prefixes GET <Path><dispatch namespace>/<user Worker>.
const Path = "/dispatch/v1/workers/"

// Handler answers a sidecar's question about one user Worker of its namespace: 404 when
// the dispatch namespace has no such Worker, else render.LoaderCode (only the placement
// for a Dedicated one) with its ID as ETag, 304 when If-None-Match names it.
type Handler struct {
	// Workers reads Workers (the manager's cache); ConfigMaps reads spec.source
	// ConfigMaps (directly: the manager's cache holds no ConfigMap data).
	Workers, ConfigMaps client.Reader
	Log                 logr.Logger
}

// ServeNamespace answers for namespace ns, the namespace of the caller's certificate.
func (h *Handler) ServeNamespace(w http.ResponseWriter, r *http.Request, ns string) {
	if r.Method != http.MethodGet {
		http.Error(w, r.Method+" "+r.URL.Path+": only GET", http.StatusMethodNotAllowed)
		return
	}
	dns, name, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, Path), "/")
	if !ok || len(validation.IsDNS1123Label(dns)) > 0 || len(validation.IsDNS1123Label(name)) > 0 {
		http.Error(w, "want "+Path+"<dispatch namespace>/<user Worker>, DNS labels", http.StatusBadRequest)
		return
	}
	code, err := h.code(r.Context(), ns, dns, name)
	switch {
	case apierrors.IsNotFound(err):
		http.Error(w, fmt.Sprintf("dispatch namespace %s of namespace %s has no user Worker %s", dns, ns, name), http.StatusNotFound)
		return
	case err != nil:
		h.Log.Info("cannot serve a Shared user Worker's code", "namespace", ns, "worker", name, "error", err.Error())
		http.Error(w, err.Error(), http.StatusConflict)
		return
	}
	etag := `"` + code.ID + `"`
	if code.ID == "" {
		etag = `"` + string(code.Placement) + `"`
	}
	w.Header().Set("ETag", etag)
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(code)
}

// code resolves user Worker name of dispatch namespace dns in namespace ns; a Worker
// outside dns, or being deleted, is not found.
func (h *Handler) code(ctx context.Context, ns, dns, name string) (*render.LoaderCode, error) {
	wk := &v1alpha1.Worker{}
	if err := h.Workers.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, wk); err != nil {
		return nil, err
	}
	if wk.Spec.DispatchNamespace != dns || !wk.DeletionTimestamp.IsZero() {
		return nil, apierrors.NewNotFound(v1alpha1.GroupVersion.WithResource("workers").GroupResource(), name)
	}
	var cm *corev1.ConfigMap
	if src := wk.Spec.Source.ConfigMap; src != nil && wk.SharedUserWorker() {
		cm = &corev1.ConfigMap{}
		if err := h.ConfigMaps.Get(ctx, client.ObjectKey{Namespace: ns, Name: src.Name}, cm); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("spec.source.configMap.name: ConfigMap %q not found", src.Name)
			}
			return nil, err
		}
	}
	return render.SharedLoaderCode(wk, cm)
}

// Client reads user Workers' code from the manager's internal API.
type Client struct {
	Base string
	HTTP *http.Client
}

// Answer is one answer of the manager: Status 200 with Body (render.LoaderCode) and
// ETag, 304 (the code named by the asked ETag is current) or 404 (no such user Worker).
type Answer struct {
	Status int
	ETag   string
	Body   []byte
}

// maxCode bounds an answer: a Worker's modules are at most the largest script size
// admission allows (10 MiB), base64 and JSON around them.
const maxCode = 16 << 20

// Get asks for user Worker name of dispatch namespace dns; etag, when set, is the code
// the caller has. Any other status is an error naming the manager's message.
func (c *Client) Get(ctx context.Context, dns, name, etag string) (Answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(c.Base, "/")+Path+dns+"/"+name, nil)
	if err != nil {
		return Answer{}, err
	}
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return Answer{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxCode))
	if err != nil {
		return Answer{}, err
	}
	switch resp.StatusCode {
	case http.StatusOK, http.StatusNotModified, http.StatusNotFound:
		return Answer{Status: resp.StatusCode, ETag: resp.Header.Get("ETag"), Body: body}, nil
	}
	return Answer{}, &StatusError{Status: resp.StatusCode, Message: fmt.Sprintf("the manager answered %s: %s", resp.Status, strings.TrimSpace(string(body)))}
}

// StatusError is an answer of the manager other than 200, 304 and 404: a refusal (4xx)
// or its failure (5xx). Errors that are not StatusErrors reached no manager.
type StatusError struct {
	Status  int
	Message string
}

func (e *StatusError) Error() string { return e.Message }
