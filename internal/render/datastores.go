package render

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/shim"
)

// Data stores (docs/kv.md, docs/d1.md, docs/queues.md): a KVNamespace, D1Database or
// Queue runs workerd's built-in Worker for it (Worker.Module.bundled) on a one-pod
// StatefulSet "<name>-<kind>" whose PVC holds the Durable Object storage; the pod's
// gateway socket serves that Worker with the store's id as props. A Worker binding it
// reaches the gateway through an external service (internal mutual TLS).

// DataKind is a kind of data store.
type DataKind string

// Data store kinds; each is also the suffix of the host StatefulSet's name.
const (
	DataKV    DataKind = "kv"
	DataD1    DataKind = "d1"
	DataQueue DataKind = "queue"
)

// dataKindInfo is what the bundled Worker of a kind expects (its header documents it).
type dataKindInfo struct {
	bundled   string // Worker.Module.bundled
	className string // its Durable Object class
	binding   string // the binding naming that class
	prop      string // the props key naming the store
	flags     []string
}

var dataKinds = map[DataKind]dataKindInfo{
	DataKV:    {bundled: "/workerd/kv.js", className: "KVNamespace", binding: "SHARD", prop: "namespace"},
	DataD1:    {bundled: "/workerd/d1.js", className: "D1Database", binding: "DATABASE", prop: "database"},
	DataQueue: {bundled: "/workerd/queues.js", className: "QueueShard", binding: "SHARD", prop: "queue", flags: []string{"service_binding_extra_handlers"}},
}

// Host pod storage: the Durable Object directory (DOStorageDir, as on shard pods) and,
// for KV, the directory of values over 64 KiB (kv.js BLOBS).
const (
	DataBlobsService = "kv-blobs"
	DataBlobsDir     = "/var/lib/workerd/kv-blobs"
	// dataStoreService is the bundled Worker in the host pod's config.
	dataStoreService = "workerd-operator:store"
	// d1GatewayService fronts d1.js with the migrations (shim datahost.js D1Gateway).
	d1GatewayService = "workerd-operator:d1-gateway"
	// queueGatewayService fronts queues.js, marking its refusals with Cloudflare's
	// error codes (shim datahost.js QueueGateway).
	queueGatewayService = "workerd-operator:queue-gateway"
	dataHostFile        = "datahost.js"
	// d1APIModule is workerd's D1 binding module (a `wrapped` binding over a service).
	d1APIModule = "cloudflare-internal:d1-api"
)

// DataRef names a data store of the Worker's namespace.
type DataRef struct {
	Kind DataKind
	Name string
}

// DataSetName is the host StatefulSet's and headless Service's name: "<name>-<kind>".
func DataSetName(kind DataKind, name string) string { return name + "-" + string(kind) }

// DataAddress is where a store's gateway answers:
// "<name>-<kind>-0.<name>-<kind>.<ns>.svc.<domain>:9093".
func DataAddress(ns string, kind DataKind, name string, opts Options) string {
	set := DataSetName(kind, name)
	return fmt.Sprintf("%s-0.%s.%s.svc.%s:%d", set, set, namespaceOr(ns), clusterDomain(opts), podcontract.GatewayPort)
}

// DataID is the store's id, the props value the bundled Worker gets and the name its
// Durable Object is found by: "<namespace>/<name>". It derives from names only, so a
// store deleted with reclaimPolicy Retain and created again finds its data.
func DataID(ns, name string) string { return namespaceOr(ns) + "/" + name }

// DataUniqueKey is the Durable Object uniqueKey of a store's host: "<namespace>-<name>-<kind>".
func DataUniqueKey(ns string, kind DataKind, name string) string {
	return namespaceOr(ns) + "-" + name + "-" + string(kind)
}

// DataHost is the store whose host pod is rendered (Input.DataHost).
type DataHost struct {
	Kind            DataKind
	Namespace, Name string
	// Migrations are a D1Database's migration files, in order; MigrationsTable
	// records them (default d1_migrations).
	Migrations      []Migration
	MigrationsTable string
	// Consumer is a Queue's consumer: the pods rendered then run the consumer Worker's
	// code (Input.Worker), whose queue() handler the queue calls in-process.
	Consumer *QueueConsumer
	// DeadLetterConsumer, when set, are the settings of the consumer of the Queue named
	// by Consumer.DeadLetterQueue, which is the same Worker: the dead letters, kept in
	// this store, are delivered to it with batch.queue = that name (docs/queues.md).
	DeadLetterConsumer *QueueConsumer
}

// QueueConsumer are a consumer's settings as /workerd/queues.js reads them (CONSUMERS);
// nil fields take its defaults, which are Cloudflare's.
type QueueConsumer struct {
	MaxBatchSize    *int32 `json:"maxBatchSize,omitempty"`
	MaxBatchTimeout *int32 `json:"maxBatchTimeout,omitempty"`
	MaxRetries      *int32 `json:"maxRetries,omitempty"`
	RetryDelay      *int32 `json:"retryDelay,omitempty"`
	DeadLetterQueue string `json:"deadLetterQueue,omitempty"`
	MaxConcurrency  *int32 `json:"maxConcurrency,omitempty"`
}

// QueueConsumerOf is the consumer settings of a Queue's spec.consumers entry.
func QueueConsumerOf(c v1alpha1.QueueConsumer) *QueueConsumer {
	return &QueueConsumer{MaxBatchSize: c.MaxBatchSize, MaxBatchTimeout: c.MaxBatchTimeout, MaxRetries: c.MaxRetries,
		RetryDelay: c.RetryDelay, DeadLetterQueue: c.DeadLetterQueue, MaxConcurrency: c.MaxConcurrency}
}

// consumerConfig is one CONSUMERS entry of queues.js: the consumer binding and c.
func consumerConfig(c *QueueConsumer) map[string]any {
	cons := map[string]any{"consumer": queueConsumerBinding}
	raw, _ := json.Marshal(c)
	_ = json.Unmarshal(raw, &cons)
	return cons
}

// queueConsumerBinding is the queue Worker's binding to the consumer (CONSUMERS.consumer).
const queueConsumerBinding = "CONSUMER"

// Migration is one wrangler migration file.
type Migration struct {
	Name string `json:"name"`
	SQL  string `json:"sql"`
}

// MigrationsOf are the .sql keys of a migrations ConfigMap's data in name order, as
// `wrangler d1 migrations apply` orders the files of migrations_dir; other keys are
// ignored.
func MigrationsOf(data map[string]string) []Migration {
	var out []Migration
	for k, v := range data {
		if strings.HasSuffix(k, ".sql") {
			out = append(out, Migration{Name: k, SQL: v})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// storeID is the props value naming the store: a queue's name (what batch.queue shows
// the consumer), else DataID.
func storeID(h DataHost) string {
	if h.Kind == DataQueue {
		return h.Name
	}
	return DataID(h.Namespace, h.Name)
}

// DataHostWorker is the Worker rendered for a store's host pod: the shim datahost.js
// answering the plain sockets; the store itself is added by Input.DataHost.
func DataHostWorker(h DataHost) *v1alpha1.Worker {
	src := string(shim.MustSource(dataHostFile))
	return &v1alpha1.Worker{
		ObjectMeta: metaFor(h.Namespace, DataSetName(h.Kind, h.Name)),
		Spec: v1alpha1.WorkerSpec{
			CompatibilityDate: ShimCompatibilityDate,
			Source: v1alpha1.WorkerSource{Inline: &v1alpha1.InlineSource{
				Modules: []v1alpha1.Module{{Name: dataHostFile, Type: v1alpha1.ModuleESModule, Content: &src}},
			}},
		},
	}
}

func metaFor(ns, name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }

// DataHostArgs are Args(w) plus the gateway socket and the storage directories.
func DataHostArgs(w *v1alpha1.Worker, kind DataKind) []string {
	args := append(Args(w), socketAddr(podcontract.GatewaySocket, podcontract.GatewayPort),
		fmt.Sprintf("--directory-path=%s=%s", DOStorageService, DOStorageDir))
	if kind == DataKV {
		args = append(args, fmt.Sprintf("--directory-path=%s=%s", DataBlobsService, DataBlobsDir))
	}
	return args
}

// dataKind renders kvNamespace, d1Database and queue bindings and, on a host pod, the store.
type dataKind struct {
	in    Input
	kind  DataKind
	bound map[string]string // address by store name
	// delayed: a queue binding has a deliveryDelay, so the pod needs QueueProducerModule.
	delayed bool
}

// QueueProducerModule is the internal extension module (shim queue-producer.js) that
// wraps workerd's queue binding for a producer with a deliveryDelay (docs/queues.md).
const (
	QueueProducerModule = "workerd-operator:queue-producer"
	queueProducerFile   = "queue-producer.js"
)

func newDataKind(kind DataKind) func(Input) (bindingKind, error) {
	return func(in Input) (bindingKind, error) {
		return &dataKind{in: in, kind: kind, bound: map[string]string{}}, nil
	}
}

func dataService(kind DataKind, name string) string { return string(kind) + ":" + name }

func (k *dataKind) bind(field string, b v1alpha1.Binding) (string, error) {
	_, name := b.Reference()
	sub := fmt.Sprintf("%s.%s.name", field, b.Kind())
	if name == "" {
		return "", fmt.Errorf("%s: required", sub)
	}
	var svc string
	if h := k.in.DataHost; h != nil && h.Kind == k.kind && h.Name == name {
		// The store is in this process: bind it directly (through its front, when it has
		// one, as its gateway does).
		svc = tuple(named(dataStoreService), kv("props", tuple(kv("json", Quote(fmt.Sprintf(`{%q: %q}`, dataKinds[k.kind].prop, storeID(*h)))))))
		if front, ok := frontOf(k.kind); ok {
			svc = front
		}
	} else {
		addr, ok := k.in.DataStores[DataRef{k.kind, name}]
		if !ok || addr == "" {
			return "", fmt.Errorf("%s: %s %q not found", sub, b.Kind(), name)
		}
		k.bound[name] = addr
		svc = Quote(dataService(k.kind, name))
	}
	switch k.kind {
	case DataKV:
		return kv("kvNamespace", svc), nil
	case DataQueue:
		if d := b.Queue.DeliveryDelay; d != nil && *d > 0 {
			k.delayed = true
			return wrapped(QueueProducerModule, tuple(named("queue"), kv("queue", svc)),
				tuple(named("deliveryDelay"), kv("json", Quote(strconv.Itoa(int(*d)))))), nil
		}
		return kv("queue", svc), nil
	}
	return wrapped(d1APIModule, tuple(named("fetcher"), kv("service", svc))), nil
}

func (k *dataKind) contribute(x *extras) error {
	for _, n := range sortedKeys(k.bound) {
		x.services.item(named(dataService(k.kind, n)), kv("external", external(k.in.Options, k.in.Worker.Namespace, k.bound[n], rpcOptions())))
	}
	if k.delayed {
		x.addExtension(QueueProducerModule, queueProducerFile)
		if err := x.addShims(queueProducerFile); err != nil {
			return err
		}
	}
	if h := k.in.DataHost; h != nil && h.Kind == k.kind {
		return k.writeHost(x, *h)
	}
	return nil
}

// writeHost writes a host pod's store: the bundled Worker with its Durable Object class
// on localDisk, the disks, and the gateway socket serving it with the store's id.
func (k *dataKind) writeHost(x *extras, h DataHost) error {
	info := dataKinds[h.Kind]
	props, _ := json.Marshal(map[string]string{info.prop: storeID(h)})
	c := &x.services
	c.openWorker(dataStoreService)
	c.field("modules", list(tuple(named(string(h.Kind)), kv("bundled", Quote(info.bundled)))))
	c.field("compatibilityDate", Quote(ShimCompatibilityDate))
	if len(info.flags) > 0 {
		c.field("compatibilityFlags", list(quoteAll(info.flags)...))
	}
	binds := []string{tuple(named(info.binding), kv("durableObjectNamespace", Quote(info.className)))}
	switch {
	case h.Kind == DataKV:
		binds = append(binds, tuple(named("BLOBS"), kv("service", Quote(DataBlobsService))))
	case h.Kind == DataQueue && h.Consumer != nil:
		consumers := map[string]any{h.Name: consumerConfig(h.Consumer)}
		if h.DeadLetterConsumer != nil && h.Consumer.DeadLetterQueue != "" {
			consumers[h.Consumer.DeadLetterQueue] = consumerConfig(h.DeadLetterConsumer)
		}
		cfg, _ := json.Marshal(consumers)
		binds = append(binds, tuple(named(queueConsumerBinding), kv("service", Quote(WorkerServiceName(k.in.Worker.Name)))),
			tuple(named("CONSUMERS"), kv("json", Quote(string(cfg)))))
	}
	c.field("bindings", list(binds...))
	c.field("durableObjectNamespaces", list(tuple(kv("className", Quote(info.className)),
		kv("uniqueKey", Quote(DataUniqueKey(h.Namespace, h.Kind, h.Name))), "enableSql = true")))
	c.field("durableObjectStorage", tuple(kv("localDisk", Quote(DOStorageService))))
	c.closeWorker()
	c.item(named(DOStorageService), "disk = (writable = true)")
	if h.Kind == DataKV {
		c.item(named(DataBlobsService), "disk = (writable = true)")
	}
	target := tuple(named(dataStoreService), kv("props", tuple(kv("json", Quote(string(props))))))
	if front, ok := frontOf(h.Kind); ok {
		if err := k.writeFront(c, h, target); err != nil {
			return err
		}
		if err := x.addShims(dataHostFile); err != nil {
			return err
		}
		target = front
	}
	if h.Kind == DataD1 {
		// Not ready until the migrations are applied (health.js, datahost.js).
		x.healthBindings = append(x.healthBindings, tuple(named("DATA"), kv("service", target)))
	}
	x.sockets.item(named(podcontract.GatewaySocket), serverSocket(rpcOptions()), kv("service", target))
	return nil
}

// frontOf is the service in front of a store of kind (shim datahost.js), if it has one.
func frontOf(kind DataKind) (string, bool) {
	switch kind {
	case DataD1:
		return tuple(named(d1GatewayService), kv("entrypoint", Quote("D1Gateway"))), true
	case DataQueue:
		return tuple(named(queueGatewayService), kv("entrypoint", Quote("QueueGateway"))), true
	}
	return "", false
}

// writeFront writes the worker in front of store: for D1, the one that applies the
// migrations; for a Queue, the one that marks its refusals.
func (k *dataKind) writeFront(c *capnp, h DataHost, store string) error {
	if h.Kind == DataD1 {
		return k.writeD1Gateway(c, h, store)
	}
	c.openWorker(queueGatewayService)
	c.field("modules", list(shimModule(dataHostFile)))
	c.field("compatibilityDate", Quote(ShimCompatibilityDate))
	c.field("bindings", list(tuple(named("STORE"), kv("service", store))))
	c.closeWorker()
	return nil
}

// writeD1Gateway writes the worker in front of d1.js that applies the migrations.
func (k *dataKind) writeD1Gateway(c *capnp, h DataHost, store string) error {
	files := append([]Migration(nil), h.Migrations...)
	sortMigrations(files)
	table := h.MigrationsTable
	if table == "" {
		table = DefaultMigrationsTable
	}
	m, err := json.Marshal(map[string]any{"table": table, "files": files})
	if err != nil {
		return err
	}
	c.openWorker(d1GatewayService)
	c.field("modules", list(shimModule(dataHostFile)))
	c.field("compatibilityDate", Quote(ShimCompatibilityDate))
	c.field("bindings", list(tuple(named("STORE"), kv("service", store)), tuple(named("MIGRATIONS"), kv("json", Quote(string(m))))))
	c.closeWorker()
	return nil
}

// DefaultMigrationsTable is wrangler's migrations_table default.
const DefaultMigrationsTable = "d1_migrations"
