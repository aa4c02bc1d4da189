package deploy

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/kubeapply"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/wrangler"
)

// DispatchDocs says how user Workers reach a dispatch namespace.
const DispatchDocs = "docs/dispatch.md"

// maxUpload bounds one script upload: Cloudflare's Worker size limit on the paid plan
// (https://developers.cloudflare.com/workers/platform/limits/#worker-size).
const maxUpload = 10 << 20

// cloudflareAPI serves on loopback, while a project's deploy path runs, the part of
// Cloudflare's REST API that deploy scripts call to put user Workers into a dispatch
// namespace (Workers for Platforms): the official SDKs and wrangler take its address
// from CLOUDFLARE_BASE_URL. An uploaded script becomes a user Worker of the cluster,
// applied and Ready before the call returns, as Cloudflare answers once it is deployed.
type cloudflareAPI struct {
	o      Options
	date   string // the project's compatibility_date: the default of an upload
	token  string
	ln     net.Listener
	srv    *http.Server
	mu     sync.Mutex
	worker []*unstructured.Unstructured
}

// startCloudflareAPI listens on a free loopback port; date is the compatibility date
// of an upload that names none.
func startCloudflareAPI(o Options, date string) (*cloudflareAPI, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	a := &cloudflareAPI{o: o, date: date, token: hex.EncodeToString(b), ln: ln}
	a.srv = &http.Server{Handler: a.handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = a.srv.Serve(ln) }()
	return a, nil
}

// handler routes the calls served, behind the token; any other call is answered 501.
func (a *cloudflareAPI) handler() http.Handler {
	mux := http.NewServeMux()
	const ns = "/client/v4/accounts/{account}/workers/dispatch/namespaces"
	mux.HandleFunc("GET "+ns+"/{namespace}", a.namespace)
	mux.HandleFunc("POST "+ns, a.createNamespace)
	mux.HandleFunc("PUT "+ns+"/{namespace}/scripts/{script}", a.uploadScript)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		apiError(w, http.StatusNotImplemented, fmt.Sprintf("%s %s: workerd-operator deploy serves only the dispatch namespace calls of Cloudflare's API (%s)", r.Method, r.URL.Path, DispatchDocs))
	})
	return a.authenticated(mux)
}

// Env points Cloudflare's SDKs and wrangler at this API.
func (a *cloudflareAPI) Env() []string {
	return []string{"CLOUDFLARE_BASE_URL=http://" + a.ln.Addr().String() + "/client/v4",
		"CLOUDFLARE_API_TOKEN=" + a.token, "CLOUDFLARE_ACCOUNT_ID=workerd-operator"}
}

// Objects are the user Workers uploaded so far.
func (a *cloudflareAPI) Objects() []*unstructured.Unstructured {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]*unstructured.Unstructured(nil), a.worker...)
}

func (a *cloudflareAPI) Close() { _ = a.srv.Close() }

// authenticated admits only the deploy's own processes: the token it gave them.
func (a *cloudflareAPI) authenticated(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get("Authorization")
		if subtle.ConstantTimeCompare([]byte(got), []byte("Bearer "+a.token)) != 1 {
			apiError(w, http.StatusUnauthorized, "Authentication error: the token is not the one deploy gave its build")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// A dispatch namespace exists as soon as a Worker names it: get and create succeed.
func (a *cloudflareAPI) namespace(w http.ResponseWriter, r *http.Request) {
	apiResult(w, map[string]any{"namespace_name": r.PathValue("namespace"), "namespace_id": r.PathValue("namespace")})
}

func (a *cloudflareAPI) createNamespace(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Name string `json:"name"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&body); err != nil || body.Name == "" {
		apiError(w, http.StatusBadRequest, "name: required")
		return
	}
	apiResult(w, map[string]any{"namespace_name": body.Name, "namespace_id": body.Name})
}

// uploadScript applies the uploaded script as a user Worker and waits until it is Ready.
func (a *cloudflareAPI) uploadScript(w http.ResponseWriter, r *http.Request) {
	wk, err := a.userWorker(r)
	if err != nil {
		apiError(w, http.StatusBadRequest, err.Error())
		return
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(wk)
	if err != nil {
		apiError(w, http.StatusInternalServerError, err.Error())
		return
	}
	u := &unstructured.Unstructured{Object: m}
	fmt.Fprintf(a.o.Log, "deploy: the build uploaded user Worker %s of dispatch namespace %s: apply\n", wk.Name, wk.Spec.DispatchNamespace)
	objs := []*unstructured.Unstructured{u}
	if err := kubeapply.Apply(r.Context(), a.o.Rest, objs, a.timeout()); err != nil {
		apiError(w, http.StatusBadRequest, err.Error())
		return
	}
	a.mu.Lock()
	a.worker = append(a.worker, u)
	a.mu.Unlock()
	if err := kubeapply.WaitReady(r.Context(), a.o.Rest, objs, a.timeout(), func([]string) {}); err != nil {
		apiError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	apiResult(w, map[string]any{"id": wk.Name, "etag": wk.Name, "created_on": time.Now().UTC().Format(time.RFC3339)})
}

func (a *cloudflareAPI) timeout() time.Duration {
	if a.o.Timeout > 0 {
		return a.o.Timeout
	}
	return 5 * time.Minute
}

// userWorker reads an upload (multipart: a "metadata" JSON part and the module files,
// https://developers.cloudflare.com/workers/configuration/multipart-upload-metadata/)
// into the Worker it becomes.
func (a *cloudflareAPI) userWorker(r *http.Request) (*v1alpha1.Worker, error) {
	ns, script := wrangler.DispatchNamespaceName(r.PathValue("namespace")), r.PathValue("script")
	if ns != r.PathValue("namespace") {
		fmt.Fprintf(a.o.Log, "deploy: dispatch namespace %q is not a DNS label: the upload goes to %s, as a dispatch_namespaces binding naming it does (%s)\n", r.PathValue("namespace"), ns, DispatchDocs)
	}
	if err := checkUserNames(ns, script); err != nil {
		return nil, err
	}
	r.Body = http.MaxBytesReader(nil, r.Body, maxUpload)
	if err := r.ParseMultipartForm(maxUpload); err != nil {
		return nil, fmt.Errorf("the upload is not a multipart form of at most %d bytes: %v (https://developers.cloudflare.com/workers/configuration/multipart-upload-metadata/)", maxUpload, err)
	}
	var meta uploadMetadata
	raw := formPart(r, "metadata")
	if raw == "" {
		return nil, fmt.Errorf("metadata: required: the upload has no metadata part (https://developers.cloudflare.com/workers/configuration/multipart-upload-metadata/)")
	}
	if err := json.Unmarshal([]byte(raw), &meta); err != nil {
		return nil, fmt.Errorf("metadata: %v", err)
	}
	modules, err := uploadedModules(r, meta.MainModule)
	if err != nil {
		return nil, err
	}
	bindings, err := meta.workerBindings()
	if err != nil {
		return nil, err
	}
	wk := &v1alpha1.Worker{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Worker"},
		ObjectMeta: metav1.ObjectMeta{Name: script, Namespace: a.o.namespace()},
		Spec: v1alpha1.WorkerSpec{
			CompatibilityDate: meta.CompatibilityDate, CompatibilityFlags: meta.CompatibilityFlags,
			DispatchNamespace: ns, Bindings: bindings, Replicas: ptr.To[int32](1),
			Source: v1alpha1.WorkerSource{Inline: &v1alpha1.InlineSource{Modules: modules}},
		},
	}
	if a.o.DispatchPlacement == v1alpha1.DispatchPlacementShared {
		// Loaded by the dispatch Workers' pods: it has no replicas of its own.
		wk.Spec.DispatchPlacement, wk.Spec.Replicas = v1alpha1.DispatchPlacementShared, nil
	}
	if wk.Spec.CompatibilityDate == "" {
		if wk.Spec.CompatibilityDate = a.date; a.date == "" {
			return nil, fmt.Errorf("metadata.compatibility_date: required: the project's wrangler configuration has none to default to")
		}
	}
	return wk, nil
}

// checkUserNames refuses a dispatch namespace or script name the cluster cannot hold.
func checkUserNames(ns, script string) error {
	if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
		return fmt.Errorf("dispatch namespace %q: %s (spec.dispatchNamespace; %s)", ns, strings.Join(msgs, "; "), DispatchDocs)
	}
	if msgs := validation.IsDNS1035Label(script); len(msgs) > 0 || len(script) > render.MaxUserWorkerName {
		return fmt.Errorf("script name %q: a user Worker's name must be a DNS label of at most %d characters starting with a letter (lowercase letters, digits, '-'; %s)", script, render.MaxUserWorkerName, DispatchDocs)
	}
	return nil
}

// formPart is the value of a multipart part: a field, or a file part without a name.
func formPart(r *http.Request, name string) string {
	if v := r.FormValue(name); v != "" {
		return v
	}
	if f, _, err := r.FormFile(name); err == nil {
		defer f.Close()
		b, _ := io.ReadAll(f)
		return string(b)
	}
	return ""
}
