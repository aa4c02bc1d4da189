package wrangler

import (
	"fmt"
	"math"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
)

// Data stores (docs/deploy.md): kv_namespaces, d1_databases and queues become
// KVNamespace, D1Database and Queue objects and bindings to them.

func typeMeta(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: kind}
}

// kvNamespaces: a KVNamespace "<worker>-<binding>" per entry (its Cloudflare id names
// a namespace of Cloudflare's, whose data is not imported).
func (c *converter) kvNamespaces(path string, v any) {
	for i, e := range list(v) {
		p := fmt.Sprintf("%s[%d]", path, i)
		m, ok := e.(map[string]any)
		binding := str(m, "binding")
		if !ok || binding == "" {
			c.unsupported(p, "needs binding")
			continue
		}
		c.only(p, m, "binding", "id", "preview_id", "remote")
		name := dnsName(c.name + "-" + kebab(binding))
		c.addBinding(v1alpha1.Binding{Name: binding, KVNamespace: &v1alpha1.LocalObjectReference{Name: name}})
		c.res.KVNamespaces = append(c.res.KVNamespaces, &v1alpha1.KVNamespace{TypeMeta: typeMeta("KVNamespace"), ObjectMeta: metav1.ObjectMeta{Name: name}})
	}
}

// d1Databases: a D1Database named database_name per entry, with the files of
// migrations_dir (default "migrations") in a ConfigMap "<database>-migrations".
func (c *converter) d1Databases(path string, v any) {
	for i, e := range list(v) {
		p := fmt.Sprintf("%s[%d]", path, i)
		m, ok := e.(map[string]any)
		binding := str(m, "binding")
		if !ok || binding == "" {
			c.unsupported(p, "needs binding")
			continue
		}
		c.only(p, m, "binding", "database_name", "database_id", "preview_database_id", "migrations_dir", "migrations_table", "remote")
		name := dnsName(stringOr(m["database_name"], c.name+"-"+kebab(binding)))
		c.addBinding(v1alpha1.Binding{Name: binding, D1Database: &v1alpha1.LocalObjectReference{Name: name}})
		db := &v1alpha1.D1Database{TypeMeta: typeMeta("D1Database"), ObjectMeta: metav1.ObjectMeta{Name: name}}
		if cm, err := c.migrationsConfigMap(name, stringOr(m["migrations_dir"], "migrations")); err != nil {
			c.unsupported(p+".migrations_dir", err.Error())
		} else if cm != nil {
			c.res.ConfigMaps = append(c.res.ConfigMaps, cm)
			db.Spec.Migrations = &v1alpha1.D1Migrations{ConfigMap: v1alpha1.LocalObjectReference{Name: cm.Name}, Table: str(m, "migrations_table")}
		}
		c.res.D1Databases = append(c.res.D1Databases, db)
	}
}

// migrationsConfigMap holds the .sql files of dir (relative to the configuration), nil
// when the directory does not exist. dir and its files must be the project's own.
func (c *converter) migrationsConfigMap(db, dir string) (*corev1.ConfigMap, error) {
	rel, err := underProject(c.root, c.dir, dir, "migrations_dir")
	if err != nil {
		return nil, err
	}
	files, err := readDirUnder(c.root, rel, func(name string) bool { return strings.HasSuffix(name, ".sql") })
	if err != nil || files == nil {
		return nil, err
	}
	cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: dnsName(db + "-migrations")}, Data: map[string]string{}}
	for name, b := range files {
		cm.Data[name] = string(b)
	}
	return cm, nil
}

// queues: a Queue per queue name; producers become queue bindings, consumers the
// Queue's consumers (this Worker).
func (c *converter) queues(path string, v any) {
	top, ok := v.(map[string]any)
	if !ok {
		c.unsupported(path, "not a table")
		return
	}
	c.only(path, top, "producers", "consumers")
	for i, e := range list(top["producers"]) {
		p := fmt.Sprintf("%s.producers[%d]", path, i)
		m, ok := e.(map[string]any)
		binding, queue := str(m, "binding"), str(m, "queue")
		if !ok || binding == "" || queue == "" {
			c.unsupported(p, "needs binding and queue")
			continue
		}
		c.only(p, m, "binding", "queue", "remote", "delivery_delay")
		qb := &v1alpha1.QueueBinding{Name: dnsName(queue)}
		if d, set := m["delivery_delay"]; set {
			if n, isInt := integer(d); isInt && n >= 0 && n <= maxDeliveryDelay {
				qb.DeliveryDelay = ptr.To(int32(n))
			} else {
				c.unsupported(p+".delivery_delay", fmt.Sprintf("%v is not a whole number of seconds from 0 to %d (%s)", d, maxDeliveryDelay, configureQueuesURL))
			}
		}
		c.addBinding(v1alpha1.Binding{Name: binding, Queue: qb})
		c.queue(dnsName(queue))
	}
	for i, e := range list(top["consumers"]) {
		c.consumer(fmt.Sprintf("%s.consumers[%d]", path, i), e)
	}
}

// maxDeliveryDelay is the longest delivery_delay Cloudflare takes, in seconds (12 hours,
// configureQueuesURL); the CRD's bound on spec.bindings[].queue.deliveryDelay.
const (
	maxDeliveryDelay   = 43200
	configureQueuesURL = "https://developers.cloudflare.com/queues/configuration/configure-queues/"
)

// queue returns the Queue named name, made on first use.
func (c *converter) queue(name string) *v1alpha1.Queue {
	for _, q := range c.res.Queues {
		if q.Name == name {
			return q
		}
	}
	q := &v1alpha1.Queue{TypeMeta: typeMeta("Queue"), ObjectMeta: metav1.ObjectMeta{Name: name}}
	c.res.Queues = append(c.res.Queues, q)
	sort.Slice(c.res.Queues, func(i, j int) bool { return c.res.Queues[i].Name < c.res.Queues[j].Name })
	return q
}

// consumer maps one queues.consumers entry onto its Queue's consumers.
func (c *converter) consumer(p string, e any) {
	m, ok := e.(map[string]any)
	queue := str(m, "queue")
	if !ok || queue == "" {
		c.unsupported(p, "needs queue")
		return
	}
	cons := v1alpha1.QueueConsumer{Worker: c.name, DeadLetterQueue: dnsNameOrEmpty(str(m, "dead_letter_queue"))}
	for _, k := range sortedKeys(m) {
		n, isInt := integer(m[k])
		set := func(into **int32) {
			if !isInt || n < 0 || n > math.MaxInt32 {
				c.unsupported(p+"."+k, fmt.Sprintf("%v is not an integer from 0 to %d (the Queue's limits: docs/queues.md)", m[k], int32(math.MaxInt32)))
				return
			}
			v := int32(n)
			*into = &v
		}
		switch k {
		case "queue", "dead_letter_queue":
		case "max_batch_size":
			set(&cons.MaxBatchSize)
		case "max_batch_timeout":
			set(&cons.MaxBatchTimeout)
		case "max_retries":
			set(&cons.MaxRetries)
		case "retry_delay":
			set(&cons.RetryDelay)
		case "max_concurrency":
			set(&cons.MaxConcurrency)
		default:
			c.unsupported(p+"."+k, unknownReason)
		}
	}
	q := c.queue(dnsName(queue))
	q.Spec.Consumers = append(q.Spec.Consumers, cons)
}

func dnsNameOrEmpty(s string) string {
	if s == "" {
		return ""
	}
	return dnsName(s)
}
