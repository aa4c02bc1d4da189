package deploy

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"sort"
	"strings"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
)

// uploadMetadata is the metadata part of a script upload
// (https://developers.cloudflare.com/workers/configuration/multipart-upload-metadata/).
type uploadMetadata struct {
	MainModule         string          `json:"main_module"`
	CompatibilityDate  string          `json:"compatibility_date"`
	CompatibilityFlags []string        `json:"compatibility_flags"`
	Bindings           []uploadBinding `json:"bindings"`
}

type uploadBinding struct {
	Type string          `json:"type"`
	Name string          `json:"name"`
	Text string          `json:"text"`
	JSON json.RawMessage `json:"json"`
}

// workerBindings are the upload's bindings as the Worker's: plain_text and json; a
// kind that needs an object of the cluster is refused, naming it.
func (m uploadMetadata) workerBindings() ([]v1alpha1.Binding, error) {
	var out []v1alpha1.Binding
	for i, b := range m.Bindings {
		switch b.Type {
		case "plain_text":
			out = append(out, v1alpha1.Binding{Name: b.Name, Text: &b.Text})
		case "json":
			s := string(b.JSON)
			out = append(out, v1alpha1.Binding{Name: b.Name, JSON: &s})
		default:
			return nil, fmt.Errorf("metadata.bindings[%d] (%s): type %q is not supported in an upload yet (plain_text and json are); "+
				"deploy the user Worker with `workerd-operator deploy --dispatch-namespace` to give it other bindings (%s)", i, b.Name, b.Type, DispatchDocs)
		}
	}
	return out, nil
}

// moduleTypes are the upload's module content types
// (https://developers.cloudflare.com/workers/configuration/multipart-upload-metadata/).
var moduleTypes = map[string]v1alpha1.ModuleType{
	"application/javascript+module": v1alpha1.ModuleESModule,
	"text/javascript+module":        v1alpha1.ModuleESModule,
	"application/javascript":        v1alpha1.ModuleCommonJS,
	"text/javascript":               v1alpha1.ModuleCommonJS,
	"text/plain":                    v1alpha1.ModuleText,
	"application/octet-stream":      v1alpha1.ModuleData,
	"application/wasm":              v1alpha1.ModuleWasm,
}

// uploadedModules are the upload's file parts, main first; source maps are left out.
func uploadedModules(r *http.Request, main string) ([]v1alpha1.Module, error) {
	if main == "" {
		return nil, fmt.Errorf("metadata.main_module: required (a service-worker script upload is not supported; %s)", DispatchDocs)
	}
	var mods []v1alpha1.Module
	fields := make([]string, 0, len(r.MultipartForm.File))
	for field := range r.MultipartForm.File {
		fields = append(fields, field)
	}
	sort.Strings(fields) // the same upload gives the same Worker
	for _, field := range fields {
		for _, h := range r.MultipartForm.File[field] {
			if field == "metadata" {
				continue
			}
			name := partFilename(h)
			ct, _, _ := mime.ParseMediaType(h.Header.Get("Content-Type"))
			if ct == "application/source-map" {
				continue
			}
			t, ok := moduleTypes[ct]
			if !ok {
				return nil, fmt.Errorf("file %s: content type %q is not a module type workerd runs (%s)", name, ct, strings.Join(sortedTypes(), ", "))
			}
			f, err := h.Open()
			if err != nil {
				return nil, err
			}
			b, err := io.ReadAll(f)
			f.Close()
			if err != nil {
				return nil, err
			}
			mods = append(mods, module(name, t, b))
		}
	}
	sort.SliceStable(mods, func(i, j int) bool { return mods[i].Name == main && mods[j].Name != main })
	if len(mods) == 0 || mods[0].Name != main {
		return nil, fmt.Errorf("metadata.main_module %q: no file of the upload has that name", main)
	}
	return mods, nil
}

// partFilename is a file part's filename as sent: a module name may have directories
// ("lib/util.mjs"), which multipart.FileHeader.Filename drops.
func partFilename(h *multipart.FileHeader) string {
	if _, params, err := mime.ParseMediaType(h.Header.Get("Content-Disposition")); err == nil && params["filename"] != "" {
		return params["filename"]
	}
	return h.Filename
}

// module is one inline module: text as content, Wasm and Data base64-encoded.
func module(name string, t v1alpha1.ModuleType, b []byte) v1alpha1.Module {
	m := v1alpha1.Module{Name: name, Type: t}
	if t == v1alpha1.ModuleWasm || t == v1alpha1.ModuleData {
		enc := base64.StdEncoding.EncodeToString(b)
		m.ContentBase64 = &enc
		return m
	}
	s := string(b)
	m.Content = &s
	return m
}

func sortedTypes() []string {
	out := make([]string, 0, len(moduleTypes))
	for k := range moduleTypes {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// apiResult and apiError answer in Cloudflare's envelope
// (https://developers.cloudflare.com/fundamentals/api/how-to/make-api-calls/).
func apiResult(w http.ResponseWriter, result any) {
	writeEnvelope(w, http.StatusOK, map[string]any{"success": true, "errors": []any{}, "messages": []any{}, "result": result})
}

func apiError(w http.ResponseWriter, status int, msg string) {
	writeEnvelope(w, status, map[string]any{"success": false, "errors": []any{map[string]any{"code": 10000 + status, "message": msg}}, "messages": []any{}, "result": nil})
}

func writeEnvelope(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}
