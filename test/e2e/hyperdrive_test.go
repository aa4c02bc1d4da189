package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// hyperdriveModule counts its visits in PostgreSQL through env.HYPERDRIVE, with the
// postgres driver as Cloudflare's Hyperdrive guide uses it
// (https://developers.cloudflare.com/hyperdrive/examples/connect-to-postgres/postgres-drivers-and-libraries/postgres-js/).
const hyperdriveModule = `import postgres from "postgres";
export default {
  async fetch(request, env, ctx) {
    const sql = postgres(env.HYPERDRIVE.connectionString, { max: 5, fetch_types: false });
    try {
      await sql` + "`create table if not exists visits (id serial primary key, path text not null)`" + `;
      await sql` + "`insert into visits (path) values (${new URL(request.url).pathname})`" + `;
      const [row] = await sql` + "`select count(*)::int as n, current_database() as db from visits`" + `;
      return new Response(row.db + " visits " + row.n);
    } catch (e) {
      return new Response("error " + e.message, { status: 500 });
    } finally {
      ctx.waitUntil(sql.end());
    }
  },
};
`

// TestHyperdrive is Done means 2 (Hyperdrive) of issue 23: a Worker pod with a
// hyperdrive binding to a Secret runs queries on a real PostgreSQL started by the test;
// each request adds a row and reads the count back.
func TestHyperdrive(t *testing.T) {
	// Not 127.0.0.1: the local cluster gives each pod its own stand-in for it.
	host, _, _ := net.SplitHostPort(podCIDRAddr(t, 20))
	pg := testenv.StartPostgres(t, host)
	entry := filepath.Join(t.TempDir(), "index.js")
	if err := os.WriteFile(entry, []byte(hyperdriveModule), 0o644); err != nil {
		t.Fatal(err)
	}
	bundle := testenv.Bundle(t, entry)
	ctx := context.Background()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: sampleNS, Name: "visits-db"}, StringData: map[string]string{
		"host": pg.Host, "port": pg.Port, "database": pg.Database, "user": pg.User, "password": pg.Password, "scheme": "postgres"}}
	if err := k8sClient.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, secret) })
	w := &fleetv1alpha1.Worker{
		ObjectMeta: metav1.ObjectMeta{Namespace: sampleNS, Name: "visits"},
		Spec: fleetv1alpha1.WorkerSpec{
			CompatibilityDate: "2026-11-01", Replicas: ptr.To[int32](1),
			Bindings: []fleetv1alpha1.Binding{{Name: "HYPERDRIVE", Hyperdrive: &fleetv1alpha1.HyperdriveBinding{
				SecretRef: fleetv1alpha1.LocalObjectReference{Name: secret.Name}}}},
			Source: fleetv1alpha1.WorkerSource{Inline: &fleetv1alpha1.InlineSource{Modules: []fleetv1alpha1.Module{{
				Name: "index.js", Type: fleetv1alpha1.ModuleESModule, Content: ptr.To(bundle),
			}}}},
		},
	}
	if err := k8sClient.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, w) })
	waitWorkerReady(t, w.Name)
	url := serviceURL(t, w.Name)
	for i := 1; i <= 3; i++ {
		want := fmt.Sprintf("%s visits %d", pg.Database, i)
		got, err := get(url + "/visit")
		if err != nil || got != want {
			pod := workerPods(t, w.Name)[0]
			log, _ := workerdLog(pod)
			t.Fatalf("request %d: got %q, %v; want %q\nworkerd args %q\n%s", i, got, err, want, pod.Spec.Containers[0].Args, log)
		}
	}
	cm := &corev1.ConfigMapList{}
	if err := k8sClient.List(ctx, cm, client.InNamespace(sampleNS)); err != nil {
		t.Fatal(err)
	}
	for _, c := range cm.Items {
		for k, v := range c.Data {
			if strings.Contains(v, pg.Password) {
				t.Errorf("ConfigMap %s key %s holds the database password", c.Name, k)
			}
		}
	}
}
