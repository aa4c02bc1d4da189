package v1alpha1_test

import (
	"context"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
)

const queueFixture = `
apiVersion: fleet.workerd-operator.io/v1alpha1
kind: Queue
metadata: {name: q}
spec:
  consumers:
    - {worker: mailer}
`

const d1Fixture = `
apiVersion: fleet.workerd-operator.io/v1alpha1
kind: D1Database
metadata: {name: db}
spec:
  migrations: {configMap: {name: db-migrations}}
`

// Queue consumer settings: Cloudflare's ranges
// (https://developers.cloudflare.com/queues/configuration/configure-queues/,
// https://developers.cloudflare.com/queues/platform/limits/).
func TestQueueValidation(t *testing.T) {
	c := func(m obj) func(obj) { return set("consumers", []any{m}) }
	runCases(t, queueFixture, []validationCase{
		{name: "minimal valid"},
		{name: "no consumer", mutate: del("consumers")},
		{name: "full valid", mutate: c(obj{"worker": "mailer", "maxBatchSize": int64(100), "maxBatchTimeout": int64(60), "maxRetries": int64(100),
			"retryDelay": int64(43200), "deadLetterQueue": "q-dlq", "maxConcurrency": int64(250)})},
		{name: "two consumers", mutate: set("consumers", []any{obj{"worker": "a"}, obj{"worker": "b"}}), wantField: "spec.consumers"},
		{name: "batch size 101", mutate: c(obj{"worker": "m", "maxBatchSize": int64(101)}), wantField: "spec.consumers[0].maxBatchSize"},
		{name: "batch size 0", mutate: c(obj{"worker": "m", "maxBatchSize": int64(0)}), wantField: "spec.consumers[0].maxBatchSize"},
		{name: "batch timeout 61", mutate: c(obj{"worker": "m", "maxBatchTimeout": int64(61)}), wantField: "spec.consumers[0].maxBatchTimeout"},
		{name: "101 retries", mutate: c(obj{"worker": "m", "maxRetries": int64(101)}), wantField: "spec.consumers[0].maxRetries"},
		{name: "retry delay over 12 hours", mutate: c(obj{"worker": "m", "retryDelay": int64(43201)}), wantField: "spec.consumers[0].retryDelay"},
		{name: "concurrency 251", mutate: c(obj{"worker": "m", "maxConcurrency": int64(251)}), wantField: "spec.consumers[0].maxConcurrency"},
		{name: "dead letter queue not a name", mutate: c(obj{"worker": "m", "deadLetterQueue": "Q_DLQ"}), wantField: "spec.consumers[0].deadLetterQueue"},
		{name: "consumer without worker", mutate: c(obj{"maxRetries": int64(1)}), wantField: "spec.consumers[0].worker"},
	})
	t.Run("defaults and the dead letter queue is not the queue", func(t *testing.T) {
		ns := createNamespace(t)
		u := fromYAML(t, queueFixture)
		u.SetNamespace(ns)
		if err := k8sClient.Create(context.Background(), u); err != nil {
			t.Fatal(err)
		}
		q := &v1alpha1.Queue{}
		if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(u), q); err != nil {
			t.Fatal(err)
		}
		// Cloudflare's defaults: 10 messages, 5 s, 3 retries, no delay.
		cs := q.Spec.Consumers[0]
		if *cs.MaxBatchSize != 10 || *cs.MaxBatchTimeout != 5 || *cs.MaxRetries != 3 || *cs.RetryDelay != 0 {
			t.Errorf("defaults %+v", cs)
		}
		self := fromYAML(t, queueFixture)
		self.SetNamespace(ns)
		self.SetName("loop")
		set("consumers", []any{obj{"worker": "m", "deadLetterQueue": "loop"}})(self.Object["spec"].(obj))
		err := k8sClient.Create(context.Background(), self)
		if err == nil {
			t.Fatal("a queue that is its own dead letter queue was admitted")
		}
		assertField(t, err, "spec.consumers")
	})
}

func TestD1DatabaseValidation(t *testing.T) {
	runCases(t, d1Fixture, []validationCase{
		{name: "minimal valid"},
		{name: "no migrations", mutate: del("migrations")},
		{name: "own table", mutate: set("migrations", obj{"configMap": obj{"name": "m"}, "table": "schema_log"})},
		{name: "table not an identifier", mutate: set("migrations", obj{"configMap": obj{"name": "m"}, "table": "drop table"}), wantField: "spec.migrations.table"},
		{name: "migrations without configMap", mutate: set("migrations", obj{"table": "t"}), wantField: "spec.migrations.configMap"},
		{name: "bad reclaimPolicy", mutate: set("storage", obj{"reclaimPolicy": "Recycle"}), wantField: "spec.storage.reclaimPolicy"},
	})
}
