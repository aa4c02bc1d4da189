package limits_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/workerd-operator/workerd-operator/internal/limits"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// TestTableRows checks every row is complete: three profile values, a unit, a source
// a user can open (Cloudflare's or etcd's documentation, or a document in docs/ of this
// repository), a provenance and an enforcement from the allowed sets, and a "how".
func TestTableRows(t *testing.T) {
	enf := map[limits.Enforcement]bool{limits.Admission: true, limits.Sidecar: true, limits.Pod: true, limits.Dispatcher: true, limits.NotEnforced: true}
	for _, l := range limits.All() {
		t.Run(string(l.Name), func(t *testing.T) {
			for _, p := range limits.Profiles {
				v, ok := l.Values[p]
				if !ok || v <= 0 {
					t.Errorf("profile %s: value %d (set %v), want > 0", p, v, ok)
				}
			}
			if l.Values[limits.Free] > l.Values[limits.Paid] {
				t.Errorf("free %d above paid %d", l.Values[limits.Free], l.Values[limits.Paid])
			}
			if l.Unit == "" || l.Description == "" || l.How == "" {
				t.Errorf("unit %q description %q how %q: all required", l.Unit, l.Description, l.How)
			}
			if !enf[l.Enforcement] {
				t.Errorf("enforcement %q not allowed", l.Enforcement)
			}
			if l.Provenance != limits.Documented && l.Provenance != limits.Measured {
				t.Errorf("provenance %q", l.Provenance)
			}
			switch {
			case strings.HasPrefix(l.Source, "https://developers.cloudflare.com/"):
			case strings.HasPrefix(l.Source, "https://etcd.io/docs/"): // limits of the platform the operator runs on
			case strings.HasPrefix(l.Source, "https://github.com/cloudflare/workerd/blob/main/types/"): // the runtime's published types
			case strings.HasPrefix(l.Source, "docs/") && strings.HasSuffix(l.Source, ".md"):
				root, err := testenv.RepoRoot()
				if err != nil {
					t.Fatal(err)
				}
				if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(l.Source))); err != nil {
					t.Errorf("source %q: %v", l.Source, err)
				}
			default:
				t.Errorf("source %q is neither a Cloudflare or etcd docs URL, workerd's published types, nor a document in docs/", l.Source)
			}
		})
	}
}

// The seed files TestSeedValues reads from the shared reference directory: the texts
// the table's values were first taken from (the table cites public pages instead).
const (
	seed000 = "000_6729543119e24b55.txt" // Workflows limits (Japanese)
	seed001 = "001_985dc923bea8d3ea.txt" // durable channels (classical Chinese)
	seed002 = "002_eda56ce4b9803877.txt" // request lifecycle and limits (Chinese)
	seed003 = "003_ddfdaca72897acfb.txt" // Durable Object constants (English)
)

// TestSeedValues checks the values taken from seeds against the seed text read at test
// time: each row names the limit, the profile, and the text in the seed that states it.
func TestSeedValues(t *testing.T) {
	cases := []struct {
		name    limits.Name
		profile limits.Profile
		want    int64
		seed    string
		text    string // as the seed writes the value
	}{
		{limits.CPUMs, limits.Paid, 300000, seed000, `"cpu_ms": 300000`},
		{limits.CPUMs, limits.Paid, 300000, seed002, "最多配置到 5 分钟（300000）"},
		{limits.CPUMs, limits.Free, 10, seed002, "HTTP 请求 CPU 时间：Free 10 ms"},
		{limits.CPUMsDefault, limits.Paid, 30000, seed000, "最大 CPU 時間は 30 秒"},
		{limits.Subrequests, limits.Paid, 10000000, seed000, `"subrequests": 10000000`},
		{limits.SubrequestsDefault, limits.Paid, 10000, seed000, "Workers Paid プランで 10,000"},
		{limits.Subrequests, limits.Free, 50, seed000, "外部サブリクエスト 50"},
		{limits.SubrequestsInternal, limits.Free, 1000, seed000, "Cloudflare サービスへのサブリクエスト 1,000"},
		{limits.MemoryMiB, limits.Paid, 128, seed002, "每 isolate 内存 128 MB"},
		{limits.StartupMs, limits.Paid, 1000, seed002, "Startup 1 秒"},
		{limits.WaitUntilMs, limits.Paid, 30000, seed002, "waitUntil 响应后最多 30 秒"},
		{limits.OutboundConnections, limits.Paid, 6, seed002, "外发连接 6 个"},
		{limits.CronCPUMsUnder1h, limits.Paid, 30000, seed002, "Paid 30 秒（间隔小于 1 小时）"},
		{limits.CronCPUMs1hOrMore, limits.Paid, 900000, seed002, "15 分钟（间隔 1 小时及以上）"},
		{limits.CronWallTimeMs, limits.Paid, 900000, seed002, "Cron、Queue 消费者、DO alarm 为 15 分钟"},
		{limits.WorkflowStepsDefault, limits.Paid, 10000, seed000, "デフォルトで 10,000 ステップ"},
		{limits.WorkflowSteps, limits.Paid, 25000, seed000, "最大 25,000 ステップ"},
		{limits.WorkflowRunningInstances, limits.Paid, 10000, seed000, "同時インスタンス 10,000"},
		{limits.ChannelsPerObject, limits.Paid, 64, seed001, "每实例至多六十四频道"},
		{limits.SubscribersPerChannel, limits.Paid, 256, seed001, "每频道至多二百五十六读者"},
		{limits.ChannelMessageBytes, limits.Paid, 65536, seed001, "单块六十四 KiB"},
		{limits.ChannelBacklogBytes, limits.Paid, 1 << 20, seed001, "每读者积压一 MiB"},
		{limits.DOChunkBytes, limits.Paid, 65536, seed003, "CHUNK_SIZE | 65,536"},
		{limits.DOTxBlobBytes, limits.Paid, 1 << 20, seed003, "MAX_TX_BLOB_BYTES | 1 MiB"},
		{limits.DOTxLogicalRows, limits.Paid, 256, seed003, "MAX_TX_LOGICAL_ROWS / MAX_TX_SQL_EXECS | 256 / 64"},
		{limits.DOTxSQLExecs, limits.Paid, 64, seed003, "MAX_TX_LOGICAL_ROWS / MAX_TX_SQL_EXECS | 256 / 64"},
		{limits.DOSQLRowBytes, limits.Paid, 2000000, seed003, "SQLITE_MAX_ROW_BYTES | 2,000,000"},
		{limits.DOSQLStatementBytes, limits.Paid, 100 * 1024, seed003, "SQLITE_MAX_STATEMENT_BYTES | 100 KiB"},
		{limits.DOSQLBoundParameters, limits.Paid, 100, seed003, "SQL_MAX_BOUND_PARAMETERS | 100"},
		{limits.DOStorageBytes, limits.Paid, 10000000000, seed003, "DO_STORAGE_LIMIT_BYTES | 10,000,000,000"},
		{limits.DOBlockConcurrencyMs, limits.Paid, 30000, seed003, "BLOCK_CONCURRENCY_CANCEL_MS | 30,000"},
		{limits.DOWebSocketAttachmentByte, limits.Paid, 16384, seed003, "WS_ATTACHMENT_LIMIT_BYTES | 16,384"},
		{limits.DORPCSafePayloadBytes, limits.Paid, 28 << 20, seed003, "MAX_RPC_SAFE_PAYLOAD_BYTES | 28 MiB"},
	}
	seeds := map[string]string{}
	for _, c := range cases {
		t.Run(string(c.name)+"/"+string(c.profile)+"/"+c.seed[:3], func(t *testing.T) {
			txt, ok := seeds[c.seed]
			if !ok {
				b, err := os.ReadFile(testenv.SharedFile(t, "seeds", c.seed))
				if err != nil {
					t.Fatal(err)
				}
				txt = string(b)
				seeds[c.seed] = txt
			}
			if !strings.Contains(txt, c.text) {
				t.Fatalf("seed %s does not say %q", c.seed, c.text)
			}
			if got := limits.Get(c.profile, c.name); got != c.want {
				t.Errorf("limits.Get(%s, %s) = %d, want %d (seed %s: %q)", c.profile, c.name, got, c.want, c.seed, c.text)
			}
		})
	}
}

func TestLoadCustom(t *testing.T) {
	cases := []struct {
		name    string
		doc     string
		limit   limits.Name
		want    int64
		wantErr string
	}{
		{"yaml sets one ceiling", "cpu_ms: 60000\n", limits.CPUMs, 60000, ""},
		{"json sets one ceiling", `{"memory_mib": 512}`, limits.MemoryMiB, 512, ""},
		{"unset keeps documented custom ceiling", "cpu_ms: 1\n", limits.MemoryMiB, 4096, ""},
		{"unknown name", "cpu: 1\n", "", 0, `unknown limit "cpu"`},
		{"negative", "cpu_ms: -1\n", "", 0, "negative"},
		{"not an integer", "cpu_ms: 1.5\n", "", 0, "not an integer"},
		// The API maximum (Limit.API.Max) is the highest usable ceiling: at it is
		// accepted, one above names the field, the maximum and where it comes from.
		{"ceiling at the API maximum", "cpu_ms: 300000\n", limits.CPUMs, 300000, ""},
		{"ceiling above the API maximum", "cpu_ms: 300001\n", "", 0,
			"cpu_ms: 300001 is above 300000, the most the API accepts for Worker spec.limits.cpuMs (its CRD schema maximum)"},
		{"channel ceiling above the API maximum", "channels_per_object: 65\n", "", 0,
			"channels_per_object: 65 is above 64, the most the API accepts for DurableObjectNamespace spec.channels.maxChannels"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tb, err := limits.LoadCustom([]byte(c.doc))
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := tb.Get(limits.Custom, c.limit); got != c.want {
				t.Errorf("custom %s = %d, want %d", c.limit, got, c.want)
			}
			if got, want := tb.Get(limits.Paid, c.limit), limits.Get(limits.Paid, c.limit); got != want {
				t.Errorf("paid %s changed by custom ceilings: %d, want %d", c.limit, got, want)
			}
		})
	}
}

func TestParseProfile(t *testing.T) {
	for in, want := range map[string]limits.Profile{"": limits.Paid, "free": limits.Free, "paid": limits.Paid, "custom": limits.Custom} {
		if got, err := limits.ParseProfile(in); err != nil || got != want {
			t.Errorf("ParseProfile(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := limits.ParseProfile("enterprise"); err == nil {
		t.Error("ParseProfile(enterprise): no error")
	}
}

// TestLimitsDocIsCurrent fails when docs/limits.md differs from the table: run
// `make docs` (go run ./hack/gen-limits-doc > docs/limits.md).
func TestLimitsDocIsCurrent(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, "docs", "limits.md"))
	if err != nil {
		t.Fatalf("docs/limits.md: %v (run make docs)", err)
	}
	if !bytes.Equal(got, limits.Markdown()) {
		t.Fatal("docs/limits.md is stale: run `make docs` (go run ./hack/gen-limits-doc > docs/limits.md)")
	}
	for _, l := range limits.All() {
		if !bytes.Contains(got, []byte("| `"+string(l.Name)+"` |")) {
			t.Errorf("docs/limits.md lacks %s", l.Name)
		}
	}
}

// TestAPIFieldsMatchCRDs checks each limit's API field against the generated CRDs of
// config/crd/bases: the field exists, its schema maximum (or maxItems) is
// Limit.API.Max, it carries the CEL rule whose message cites the limit and its source
// (Limit.APIMessage), and no profile's value is above it (a value the API server would
// reject before admission).
func TestAPIFieldsMatchCRDs(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in config/crd/bases: %v", err)
	}
	schemas := map[string]*apiextensionsv1.JSONSchemaProps{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(b, &crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, v := range crd.Spec.Versions {
			if v.Storage {
				schemas[crd.Spec.Names.Kind] = v.Schema.OpenAPIV3Schema
			}
		}
	}
	n := 0
	for _, l := range limits.All() {
		if l.API == nil {
			continue
		}
		n++
		t.Run(string(l.Name), func(t *testing.T) {
			s := schemas[l.API.Kind]
			if s == nil {
				t.Fatalf("no CRD of kind %q", l.API.Kind)
			}
			for _, part := range strings.Split(l.API.Path, ".") {
				p, ok := s.Properties[part]
				if !ok {
					t.Fatalf("%s %s: no field %q in the CRD schema", l.API.Kind, l.API.Path, part)
				}
				s = &p
			}
			max := s.Maximum
			if l.API.Items {
				if s.MaxItems != nil {
					f := float64(*s.MaxItems)
					max = &f
				}
			}
			if max == nil || int64(*max) != l.API.Max {
				t.Errorf("%s %s: CRD maximum %v, table API.Max %d", l.API.Kind, l.API.Path, max, l.API.Max)
			}
			// The schema's own rejection carries no limit or source; the CEL rule's
			// message does, and it is the table's text.
			found := l.API.Rule() == ""
			for _, r := range s.XValidations {
				found = found || (r.Rule == l.API.Rule() && r.Message == l.APIMessage())
			}
			if !found {
				t.Errorf("%s %s: no x-kubernetes-validations rule %q with message %q; put this marker on the field in api/v1alpha1:\n// +kubebuilder:validation:XValidation:rule=%q,message=%q",
					l.API.Kind, l.API.Path, l.API.Rule(), l.APIMessage(), l.API.Rule(), l.APIMessage())
			}
			for p, v := range l.Values {
				if v > l.API.Max {
					t.Errorf("profile %s value %d is above the API maximum %d", p, v, l.API.Max)
				}
			}
		})
	}
	if n == 0 {
		t.Fatal("no limit names an API field")
	}
}

// TestCiteCustomCeiling: an operator's custom ceiling is cited as the operator's only
// under the custom profile, and only for the limits it set; free and paid cite the
// documented source.
func TestCiteCustomCeiling(t *testing.T) {
	tb, err := limits.LoadCustom([]byte("cpu_ms: 60000\n"))
	if err != nil {
		t.Fatal(err)
	}
	const note = "(custom ceiling set by the operator)"
	cases := []struct {
		n        limits.Name
		p        limits.Profile
		wantNote bool
	}{
		{limits.CPUMs, limits.Custom, true},
		{limits.CPUMs, limits.Paid, false},
		{limits.CPUMs, limits.Free, false},
		{limits.Subrequests, limits.Custom, false},
	}
	for _, c := range cases {
		l, _ := tb.Limit(c.n)
		doc, _ := limits.Lookup(c.n)
		got := l.Cite(c.p)
		if strings.Contains(got, note) != c.wantNote || !strings.Contains(got, "source: "+doc.Source) {
			t.Errorf("%s under %s: %q (want the note: %t)", c.n, c.p, got, c.wantNote)
		}
	}
}
