package wrangler

import (
	"strings"
	"testing"
)

// kv_namespaces, d1_databases (with migrations_dir) and queues map to KVNamespace,
// D1Database (+ migrations ConfigMap) and Queue objects and bindings
// (https://developers.cloudflare.com/workers/wrangler/configuration/#kv-namespaces,
// #d1-databases, #queues).
func TestDataStoreKeys(t *testing.T) {
	dir := writeProject(t, map[string]string{
		"wrangler.jsonc": `{
  "name": "shop", "main": "index.js", "compatibility_date": "2025-01-01",
  "kv_namespaces": [{"binding": "CACHE", "id": "abc"}],
  "d1_databases": [{"binding": "DB", "database_name": "shop-db", "database_id": "x", "migrations_dir": "db/migrations"}],
  "queues": {
    "producers": [{"binding": "JOBS", "queue": "jobs"}, {"binding": "LATER", "queue": "jobs", "delivery_delay": 30}],
    "consumers": [{"queue": "jobs", "max_batch_size": 5, "max_retries": 2, "dead_letter_queue": "jobs-dlq", "retry_delay": 10}]
  }
}`,
		"index.js":                 "export default {}",
		"db/migrations/0001_a.sql": "CREATE TABLE a (id INTEGER);",
		"db/migrations/notes.txt":  "ignored",
	})
	res, err := Import(Options{Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := res.WriteYAML(&b); err != nil {
		t.Fatal(err)
	}
	y := b.String()
	for _, want := range []string{
		"kvNamespace:\n      name: shop-cache", "d1Database:\n      name: shop-db", "queue:\n      name: jobs", "name: LATER\n    queue:\n      deliveryDelay: 30\n      name: jobs",
		"kind: KVNamespace\nmetadata:\n  name: shop-cache",
		"kind: ConfigMap\nmetadata:\n  name: shop-db-migrations", "0001_a.sql: CREATE TABLE a (id INTEGER);",
		"kind: D1Database\nmetadata:\n  name: shop-db\nspec:\n  migrations:\n    configMap:\n      name: shop-db-migrations",
		"kind: Queue\nmetadata:\n  name: jobs\nspec:\n  consumers:\n  - deadLetterQueue: jobs-dlq\n    maxBatchSize: 5\n    maxRetries: 2\n    retryDelay: 10\n    worker: shop",
	} {
		if !strings.Contains(y, want) {
			t.Errorf("missing %q in:\n%s", want, y)
		}
	}
	if strings.Contains(y, "notes.txt") {
		t.Errorf("a non-.sql file became a migration:\n%s", y)
	}
}

// A producer's delivery_delay outside Cloudflare's 0 to 43200 seconds is refused, naming
// the key, the bound and the page.
func TestQueueProducerDeliveryDelayRange(t *testing.T) {
	for _, d := range []string{"43201", "-1", "1.5", `"30"`} {
		dir := writeProject(t, map[string]string{
			"wrangler.jsonc": `{"name": "shop", "main": "index.js", "compatibility_date": "2025-01-01",
  "queues": {"producers": [{"binding": "Q", "queue": "jobs", "delivery_delay": ` + d + `}]}}`,
			"index.js": "export default {}",
		})
		_, err := Import(Options{Path: dir})
		if err == nil {
			t.Fatalf("delivery_delay %s imported", d)
		}
		for _, want := range []string{"queues.producers[0].delivery_delay", "43200", configureQueuesURL} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("delivery_delay %s: error %q does not name %s", d, err, want)
			}
		}
	}
}

// A queue consumer's integer past int32 is refused, not wrapped into range
// (4294967396 would be a max_batch_size of 100).
func TestQueueConsumerIntegerRange(t *testing.T) {
	dir := writeProject(t, map[string]string{
		"wrangler.jsonc": `{"name": "shop", "main": "index.js", "compatibility_date": "2025-01-01",
  "queues": {"consumers": [{"queue": "jobs", "max_batch_size": 4294967396, "max_retries": -1}]}}`,
		"index.js": "export default {}",
	})
	res, err := Import(Options{Path: dir})
	if err == nil {
		var b strings.Builder
		_ = res.WriteYAML(&b)
		t.Fatalf("imported:\n%s", b.String())
	}
	for _, want := range []string{"queues.consumers[0].max_batch_size", "queues.consumers[0].max_retries", "docs/queues.md"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

// TestObjectsApplyOrder: what the Worker's bindings name comes before the Worker (its
// bindings resolve at once), what names the Worker (workerRef) after it.
func TestObjectsApplyOrder(t *testing.T) {
	dir := writeProject(t, map[string]string{
		"wrangler.jsonc": `{
  "name": "shop", "main": "index.js", "compatibility_date": "2025-01-01",
  "kv_namespaces": [{"binding": "CACHE", "id": "abc"}],
  "d1_databases": [{"binding": "DB", "database_name": "shop-db"}],
  "durable_objects": {"bindings": [{"name": "ROOMS", "class_name": "Room"}]},
  "triggers": {"crons": ["0 * * * *"]}
}`,
		"index.js":              "export default {}; export class Room {}",
		"migrations/0001_a.sql": "CREATE TABLE a (id INTEGER);",
	})
	res, err := Import(Options{Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := res.Unstructured()
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetKind())
		if _, ok := o.Object["status"]; ok {
			t.Errorf("%s %s carries a status", o.GetKind(), o.GetName())
		}
	}
	want := "ConfigMap KVNamespace D1Database Worker DurableObjectNamespace CronSchedule"
	if got := strings.Join(kinds, " "); got != want {
		t.Errorf("apply order %s, want %s", got, want)
	}
}
