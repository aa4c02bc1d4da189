package render_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/workerd-operator/workerd-operator/api/v1alpha1"
	"github.com/workerd-operator/workerd-operator/internal/localrun"
	"github.com/workerd-operator/workerd-operator/internal/podcontract"
	"github.com/workerd-operator/workerd-operator/internal/render"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// hyperdriveWorker uses Hyperdrive as Cloudflare's guide for the postgres driver shows
// (https://developers.cloudflare.com/hyperdrive/examples/connect-to-postgres/postgres-drivers-and-libraries/postgres-js/):
// postgres(env.HYPERDRIVE.connectionString, {max: 5, fetch_types: false}).
const hyperdriveWorker = `import postgres from "postgres";
export default {
  async fetch(request, env, ctx) {
    const sql = postgres(env.HYPERDRIVE.connectionString, { max: 5, fetch_types: false });
    try {
      await sql` + "`create table if not exists items (id serial primary key, name text not null)`" + `;
      await sql` + "`insert into items (name) values (${'apple'}), (${'pear'})`" + `;
      const rows = await sql` + "`select name, current_database() as db, current_user as who from items order by id`" + `;
      return Response.json({ names: rows.map((r) => r.name), db: rows[0].db, who: rows[0].who,
        host: env.HYPERDRIVE.host, port: env.HYPERDRIVE.port, user: env.HYPERDRIVE.user, database: env.HYPERDRIVE.database });
    } catch (e) {
      return new Response("error " + e.message, { status: 500 });
    } finally {
      ctx.waitUntil(sql.end());
    }
  },
};
`

// TestHyperdrivePostgres: a Worker with a hyperdrive binding runs queries on a real
// PostgreSQL through the pinned workerd, with the postgres driver bundled as a template
// would (esbuild); the credentials come from the Secret's files, never the config.
func TestHyperdrivePostgres(t *testing.T) {
	pg := testenv.StartPostgres(t, "")
	entry := filepath.Join(t.TempDir(), "index.js")
	if err := os.WriteFile(entry, []byte(hyperdriveWorker), 0o644); err != nil {
		t.Fatal(err)
	}
	bundle := testenv.Bundle(t, entry)
	w := &v1alpha1.Worker{ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: "ns"}, Spec: v1alpha1.WorkerSpec{
		CompatibilityDate: "2025-06-01", CompatibilityFlags: []string{"nodejs_compat"},
		Bindings: []v1alpha1.Binding{{Name: "HYPERDRIVE", Hyperdrive: &v1alpha1.HyperdriveBinding{SecretRef: v1alpha1.LocalObjectReference{Name: "pg"}}}},
		Source: v1alpha1.WorkerSource{Inline: &v1alpha1.InlineSource{Modules: []v1alpha1.Module{
			{Name: "index.js", Type: v1alpha1.ModuleESModule, Content: ptr.To(bundle)}}}},
	}}
	out, err := render.Render(render.Input{Worker: w})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range out.Files {
		if strings.Contains(string(f.Data), pg.Password) {
			t.Fatalf("%s holds the password", f.Path)
		}
	}
	dir := t.TempDir()
	if err := localrun.WriteFiles(dir, out.Files); err != nil {
		t.Fatal(err)
	}
	// The Secret's keys as the pod's Secret volume lays them out.
	secret := map[string]string{"host": pg.Host, "port": pg.Port, "database": pg.Database, "user": pg.User, "password": pg.Password, "scheme": "postgres"}
	if len(out.SecretVolumes) != 1 || out.SecretVolumes[0].Secret != "pg" {
		t.Fatalf("SecretVolumes %+v, want the Secret pg", out.SecretVolumes)
	}
	sd := filepath.Join(dir, out.SecretVolumes[0].Dir)
	if err := os.MkdirAll(sd, 0o755); err != nil {
		t.Fatal(err)
	}
	for k, v := range secret {
		if err := os.WriteFile(filepath.Join(sd, k), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l, err := localrun.StartLocal(ctx, localrun.LocalOptions{Binary: testenv.WorkerdBinary(t), Dir: dir,
		Externals: map[string]string{"hyperdrive:HYPERDRIVE": pg.Host + ":" + pg.Port}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Stop()
	got := get(t, "http://"+l.Addrs[podcontract.HTTPSocket]+"/")
	want := `{"names":["apple","pear"],"db":"shop","who":"worker","host":`
	if !strings.HasPrefix(got, want) || !strings.Contains(got, `"port":5432,"user":"worker","database":"shop"`) {
		t.Errorf("got %s\nwant %s... with port 5432 (Hyperdrive's), user and database\n%s", got, want, l.Output())
	}
}
