package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/render"
)

const (
	testToken = "0123456789abcdef0123456789abcdef"
	testDate  = "2025-04-01" // the project's compatibility_date
	nsPath    = "/client/v4/accounts/workerd-operator/workers/dispatch/namespaces"
)

// testAPI is the API as deploy serves it, without a listener or a cluster.
func testAPI(date string) *cloudflareAPI {
	return &cloudflareAPI{o: Options{Namespace: "team", Log: io.Discard}, date: date, token: testToken}
}

// apiErrorBody is Cloudflare's envelope of a failed call, as apiError writes it.
func apiErrorBody(status int, msg string) string {
	b, _ := json.Marshal(msg)
	return fmt.Sprintf(`{"errors":[{"code":%d,"message":%s}],"messages":[],"result":null,"success":false}`+"\n", 10000+status, b)
}

// TestCloudflareAPI: only the token deploy gave its build is admitted (401 in
// Cloudflare's envelope otherwise); dispatch namespaces exist as soon as they are named,
// so get and create succeed; a call not served is 501, naming docs/dispatch.md; an upload
// that cannot become a user Worker is 400 before anything reaches the cluster.
func TestCloudflareAPI(t *testing.T) {
	const unauthorized = "Authentication error: the token is not the one deploy gave its build"
	notServed := func(method, path string) string {
		return apiErrorBody(http.StatusNotImplemented, method+" "+path+
			": workerd-operator deploy serves only the dispatch namespace calls of Cloudflare's API (docs/dispatch.md)")
	}
	nsResult := `{"errors":[],"messages":[],"result":{"namespace_id":"my-dispatch-namespace","namespace_name":"my-dispatch-namespace"},"success":true}` + "\n"
	bearer := "Bearer " + testToken
	for _, tc := range []struct {
		name, method, path, auth, body string
		wantStatus                     int
		wantBody                       string
	}{
		{"no token", "GET", nsPath + "/my-dispatch-namespace", "", "", 401, apiErrorBody(401, unauthorized)},
		{"wrong token", "GET", nsPath + "/my-dispatch-namespace", "Bearer " + strings.Repeat("0", 32), "", 401, apiErrorBody(401, unauthorized)},
		{"token under another scheme", "GET", nsPath + "/my-dispatch-namespace", "Basic " + testToken, "", 401, apiErrorBody(401, unauthorized)},
		{"bare token without Bearer", "GET", nsPath + "/my-dispatch-namespace", testToken, "", 401, apiErrorBody(401, unauthorized)},
		{"no token on an unserved call", "DELETE", nsPath + "/my-dispatch-namespace", "", "", 401, apiErrorBody(401, unauthorized)},
		{"no token on an upload", "PUT", nsPath + "/my-dispatch-namespace/scripts/hello", "", "", 401, apiErrorBody(401, unauthorized)},
		{"get namespace", "GET", nsPath + "/my-dispatch-namespace", bearer, "", 200, nsResult},
		{"create namespace", "POST", nsPath, bearer, `{"name":"my-dispatch-namespace"}`, 200, nsResult},
		{"create namespace without name", "POST", nsPath, bearer, `{}`, 400, apiErrorBody(400, "name: required")},
		{"create namespace, body not JSON", "POST", nsPath, bearer, `name=x`, 400, apiErrorBody(400, "name: required")},
		{"list namespaces", "GET", nsPath, bearer, "", 501, notServed("GET", nsPath)},
		{"delete namespace", "DELETE", nsPath + "/my-dispatch-namespace", bearer, "", 501, notServed("DELETE", nsPath+"/my-dispatch-namespace")},
		{"get script", "GET", nsPath + "/my-dispatch-namespace/scripts/hello", bearer, "", 501, notServed("GET", nsPath+"/my-dispatch-namespace/scripts/hello")},
		{"delete script", "DELETE", nsPath + "/my-dispatch-namespace/scripts/hello", bearer, "", 501, notServed("DELETE", nsPath+"/my-dispatch-namespace/scripts/hello")},
		{"account script upload", "PUT", "/client/v4/accounts/workerd-operator/workers/scripts/hello", bearer, "", 501,
			notServed("PUT", "/client/v4/accounts/workerd-operator/workers/scripts/hello")},
		{"kv", "GET", "/client/v4/accounts/workerd-operator/storage/kv/namespaces", bearer, "", 501,
			notServed("GET", "/client/v4/accounts/workerd-operator/storage/kv/namespaces")},
		{"upload refused", "PUT", nsPath + "/my-dispatch-namespace/scripts/this-is_my_script-01", bearer, "", 400,
			apiErrorBody(400, `script name "this-is_my_script-01": a user Worker's name must be a DNS label of at most 50 characters starting with a letter (lowercase letters, digits, '-'; docs/dispatch.md)`)},
		{"upload not multipart", "PUT", nsPath + "/my-dispatch-namespace/scripts/hello", bearer, `{"main_module":"a.js"}`, 400,
			apiErrorBody(400, "the upload is not a multipart form of at most 10485760 bytes: request Content-Type isn't multipart/form-data (https://developers.cloudflare.com/workers/configuration/multipart-upload-metadata/)")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
			if tc.auth != "" {
				r.Header.Set("Authorization", tc.auth)
			}
			if tc.body != "" && tc.method == "POST" {
				r.Header.Set("Content-Type", "application/json")
			}
			w := httptest.NewRecorder()
			testAPI(testDate).handler().ServeHTTP(w, r)
			if w.Code != tc.wantStatus || w.Body.String() != tc.wantBody {
				t.Errorf("%s %s = %d %s\nwant %d %s", tc.method, tc.path, w.Code, w.Body, tc.wantStatus, tc.wantBody)
			}
			if ct := w.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", ct)
			}
		})
	}
}

// part is one part of a script upload.
type part struct {
	field, filename, contentType, content string
}

// sdkMetadata is the metadata part as Cloudflare's JS SDK (cloudflare 5.x, scripts.update)
// sends it: a file part named and called "metadata", of type application/json.
func sdkMetadata(json string) part {
	return part{"metadata", "metadata", "application/json", json}
}

// sdkFile is a module as the SDK sends it: every file in the field "files", named by
// its filename.
func sdkFile(name, contentType, content string) part {
	return part{"files", name, contentType, content}
}

// uploadRequest is a PUT of a script upload as the router hands it to uploadScript.
func uploadRequest(t *testing.T, ns, script string, parts ...part) *http.Request {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for _, p := range parts {
		h := textproto.MIMEHeader{}
		cd := fmt.Sprintf(`form-data; name=%q`, p.field)
		if p.filename != "" {
			cd += fmt.Sprintf(`; filename=%q`, p.filename)
		}
		h.Set("Content-Disposition", cd)
		if p.contentType != "" {
			h.Set("Content-Type", p.contentType)
		}
		w, err := mw.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(w, p.content); err != nil {
			t.Fatal(err)
		}
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("PUT", nsPath+"/"+ns+"/scripts/"+script, &body)
	r.Header.Set("Content-Type", mw.FormDataContentType())
	r.SetPathValue("namespace", ns)
	r.SetPathValue("script", script)
	return r
}

// userWorkerOf is the Worker an upload of these modules and bindings should become.
func userWorkerOf(ns, script, date string, flags []string, bindings []v1alpha1.Binding, modules ...v1alpha1.Module) *v1alpha1.Worker {
	return &v1alpha1.Worker{
		TypeMeta:   metav1.TypeMeta{APIVersion: "fleet.workerd-operator.io/v1alpha1", Kind: "Worker"},
		ObjectMeta: metav1.ObjectMeta{Name: script, Namespace: "team"},
		Spec: v1alpha1.WorkerSpec{
			CompatibilityDate: date, CompatibilityFlags: flags, DispatchNamespace: ns,
			Bindings: bindings, Replicas: ptr.To[int32](1),
			Source: v1alpha1.WorkerSource{Inline: &v1alpha1.InlineSource{Modules: modules}},
		},
	}
}

func text(name string, t v1alpha1.ModuleType, content string) v1alpha1.Module {
	return v1alpha1.Module{Name: name, Type: t, Content: ptr.To(content)}
}

func binary(name string, t v1alpha1.ModuleType, base64 string) v1alpha1.Module {
	return v1alpha1.Module{Name: name, Type: t, ContentBase64: ptr.To(base64)}
}

// TestUserWorker: an upload
// (https://developers.cloudflare.com/workers/configuration/multipart-upload-metadata/)
// becomes exactly this user Worker, or is refused with exactly this message.
func TestUserWorker(t *testing.T) {
	const ns = "my-dispatch-namespace"
	const worker = "export default { fetch() { return new Response('hi') } }"
	longest := strings.Repeat("a", render.MaxUserWorkerName)
	tooLong := strings.Repeat("a", render.MaxUserWorkerName+1)
	scriptName := func(name string) string {
		return fmt.Sprintf(`script name %q: a user Worker's name must be a DNS label of at most 50 characters starting with a letter (lowercase letters, digits, '-'; docs/dispatch.md)`, name)
	}
	mainFile := sdkFile("worker.mjs", "application/javascript+module", worker)
	for _, tc := range []struct {
		name         string
		date         string // the project's compatibility_date
		ns, script   string
		parts        []part
		want         *v1alpha1.Worker
		wantErr      string
		wantErrStart string // for errors that end in Go's own wording
	}{
		{
			name: "the SDK's upload, every module type, main first", date: testDate, ns: ns, script: "my-hello-world-script",
			parts: []part{
				sdkMetadata(`{"main_module":"worker.mjs","compatibility_date":"2024-11-01","compatibility_flags":["nodejs_compat"],` +
					`"bindings":[{"type":"plain_text","name":"MESSAGE","text":"Hello World!"},{"type":"json","name":"CONFIG","json":{"a":[1,2],"b":"c"}}]}`),
				sdkFile("lib/util.mjs", "text/javascript+module", "export const x = 1"),
				sdkFile("lib/util.mjs.map", "application/source-map", `{"version":3}`),
				sdkFile("legacy.cjs", "application/javascript; charset=utf-8", "module.exports = 1"),
				sdkFile("other.js", "text/javascript", "exports.y = 2"),
				mainFile,
				sdkFile("worker.mjs.map", "application/source-map", `{"version":3}`),
				sdkFile("greeting.txt", "text/plain", "hello"),
				sdkFile("blob.bin", "application/octet-stream", "\x00\x01\xfe\xff"),
				sdkFile("add.wasm", "application/wasm", "\x00asm\x01\x00\x00\x00"),
			},
			want: userWorkerOf(ns, "my-hello-world-script", "2024-11-01", []string{"nodejs_compat"},
				[]v1alpha1.Binding{{Name: "MESSAGE", Text: ptr.To("Hello World!")}, {Name: "CONFIG", JSON: ptr.To(`{"a":[1,2],"b":"c"}`)}},
				text("worker.mjs", v1alpha1.ModuleESModule, worker),
				text("lib/util.mjs", v1alpha1.ModuleESModule, "export const x = 1"),
				text("legacy.cjs", v1alpha1.ModuleCommonJS, "module.exports = 1"),
				text("other.js", v1alpha1.ModuleCommonJS, "exports.y = 2"),
				text("greeting.txt", v1alpha1.ModuleText, "hello"),
				binary("blob.bin", v1alpha1.ModuleData, "AAH+/w=="),
				binary("add.wasm", v1alpha1.ModuleWasm, "AGFzbQEAAAA="),
			),
		},
		{
			// wrangler's own form: metadata a plain field, each module a field of its name;
			// the order of the other modules does not depend on the order of the fields.
			name: "wrangler's upload, the project's date by default", date: testDate, ns: ns, script: "hello",
			parts: []part{
				{"b.mjs", "b.mjs", "application/javascript+module", "export const b = 2"},
				{"metadata", "", "", `{"main_module":"index.js"}`},
				{"a.mjs", "a.mjs", "application/javascript+module", "export const a = 1"},
				{"index.js", "index.js", "application/javascript+module", worker},
			},
			want: userWorkerOf(ns, "hello", testDate, nil, nil,
				text("index.js", v1alpha1.ModuleESModule, worker),
				text("a.mjs", v1alpha1.ModuleESModule, "export const a = 1"),
				text("b.mjs", v1alpha1.ModuleESModule, "export const b = 2"),
			),
		},
		{
			name: "name of the longest user Worker", date: testDate, ns: ns, script: longest,
			parts: []part{sdkMetadata(`{"main_module":"worker.mjs"}`), mainFile},
			want:  userWorkerOf(ns, longest, testDate, nil, nil, text("worker.mjs", v1alpha1.ModuleESModule, worker)),
		},
		{
			name: "no compatibility date anywhere", date: "", ns: ns, script: "hello",
			parts:   []part{sdkMetadata(`{"main_module":"worker.mjs"}`), mainFile},
			wantErr: "metadata.compatibility_date: required: the project's wrangler configuration has none to default to",
		},
		{
			name: "a binding of a kind that needs a cluster object", date: testDate, ns: ns, script: "hello",
			parts: []part{sdkMetadata(`{"main_module":"worker.mjs","bindings":[{"type":"plain_text","name":"A","text":"a"},` +
				`{"type":"kv_namespace","name":"MY_KV","namespace_id":"0f2ac74b498b48028cb68387c421e279"}]}`), mainFile},
			wantErr: "metadata.bindings[1] (MY_KV): type \"kv_namespace\" is not supported in an upload yet (plain_text and json are); " +
				"deploy the user Worker with `workerd-operator deploy --dispatch-namespace` to give it other bindings (docs/dispatch.md)",
		},
		{
			name: "no main_module (a service-worker script)", date: testDate, ns: ns, script: "hello",
			parts:   []part{sdkMetadata(`{"body_part":"worker.js"}`), sdkFile("worker.js", "application/javascript", "addEventListener('fetch', () => {})")},
			wantErr: "metadata.main_module: required (a service-worker script upload is not supported; docs/dispatch.md)",
		},
		{
			name: "main_module names no file", date: testDate, ns: ns, script: "hello",
			parts:   []part{sdkMetadata(`{"main_module":"index.mjs"}`), mainFile},
			wantErr: `metadata.main_module "index.mjs": no file of the upload has that name`,
		},
		{
			name: "main_module names a source map", date: testDate, ns: ns, script: "hello",
			parts:   []part{sdkMetadata(`{"main_module":"worker.mjs.map"}`), mainFile, sdkFile("worker.mjs.map", "application/source-map", "{}")},
			wantErr: `metadata.main_module "worker.mjs.map": no file of the upload has that name`,
		},
		{
			name: "no files", date: testDate, ns: ns, script: "hello",
			parts:   []part{sdkMetadata(`{"main_module":"worker.mjs"}`)},
			wantErr: `metadata.main_module "worker.mjs": no file of the upload has that name`,
		},
		{
			name: "a module type workerd does not run", date: testDate, ns: ns, script: "hello",
			parts: []part{sdkMetadata(`{"main_module":"worker.mjs"}`), mainFile, sdkFile("app/main.py", "text/x-python", "print(1)")},
			wantErr: `file app/main.py: content type "text/x-python" is not a module type workerd runs (application/javascript, ` +
				`application/javascript+module, application/octet-stream, application/wasm, text/javascript, text/javascript+module, text/plain)`,
		},
		{
			name: "no metadata", date: testDate, ns: ns, script: "hello",
			parts:   []part{mainFile},
			wantErr: "metadata: required: the upload has no metadata part (https://developers.cloudflare.com/workers/configuration/multipart-upload-metadata/)",
		},
		{
			name: "metadata not JSON", date: testDate, ns: ns, script: "hello",
			parts:   []part{sdkMetadata(`not json`), mainFile},
			wantErr: "metadata: invalid character 'o' in literal null (expecting 'u')",
		},
		{
			name: "script name of Cloudflare's docs: not a DNS label", date: testDate, ns: ns, script: "this-is_my_script-01",
			parts: []part{sdkMetadata(`{"main_module":"worker.mjs"}`), mainFile}, wantErr: scriptName("this-is_my_script-01"),
		},
		{
			name: "script name with capitals", date: testDate, ns: ns, script: "Hello",
			parts: []part{sdkMetadata(`{"main_module":"worker.mjs"}`), mainFile}, wantErr: scriptName("Hello"),
		},
		{
			name: "script name one character too long", date: testDate, ns: ns, script: tooLong,
			parts: []part{sdkMetadata(`{"main_module":"worker.mjs"}`), mainFile}, wantErr: scriptName(tooLong),
		},
		{
			name: "script name starting with a digit", date: testDate, ns: ns, script: "1site",
			parts: []part{sdkMetadata(`{"main_module":"worker.mjs"}`), mainFile}, wantErr: scriptName("1site"),
		},
		{
			// As a dispatch_namespaces binding naming it maps it (wrangler.DispatchNamespaceName).
			name: "dispatch namespace not a DNS label: mapped as the binding maps it", date: testDate, ns: "My_Namespace", script: "hello",
			parts: []part{sdkMetadata(`{"main_module":"worker.mjs"}`), mainFile},
			want:  userWorkerOf("my-namespace", "hello", testDate, nil, nil, text("worker.mjs", v1alpha1.ModuleESModule, worker)),
		},
		{
			name: "larger than 10 MiB", date: testDate, ns: ns, script: "hello",
			parts:        []part{sdkMetadata(`{"main_module":"worker.mjs"}`), sdkFile("worker.mjs", "application/javascript+module", strings.Repeat("x", maxUpload))},
			wantErrStart: "the upload is not a multipart form of at most 10485760 bytes: ",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := testAPI(tc.date).userWorker(uploadRequest(t, tc.ns, tc.script, tc.parts...))
			switch {
			case tc.wantErrStart != "":
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErrStart) || !strings.Contains(err.Error(), "request body too large") {
					t.Fatalf("userWorker() = %v, want an error starting %q (request body too large)", err, tc.wantErrStart)
				}
				return
			case tc.wantErr != "":
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("userWorker() error = %v\nwant %s", err, tc.wantErr)
				}
				return
			case err != nil:
				t.Fatalf("userWorker(): %v", err)
			}
			g, _ := json.MarshalIndent(got, "", "  ")
			w, _ := json.MarshalIndent(tc.want, "", "  ")
			if string(g) != string(w) {
				t.Errorf("userWorker() =\n%s\nwant\n%s", g, w)
			}
		})
	}
}
