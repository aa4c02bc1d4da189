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

// hyperdriveWorkers use Hyperdrive as Cloudflare's guides for the two drivers show
// (https://developers.cloudflare.com/hyperdrive/examples/connect-to-postgres/postgres-drivers-and-libraries/postgres-js/
// and .../node-postgres/): postgres(env.HYPERDRIVE.connectionString, {max: 5,
// fetch_types: false}), and new Client({connectionString}) of pg. Each creates its own
// table, adds two rows and reads them back with the database and user it is connected as.
var hyperdriveWorkers = map[string]string{
	"postgres": `import postgres from "postgres";
export default {
  async fetch(request, env, ctx) {
    const sql = postgres(env.HYPERDRIVE.connectionString, { max: 5, fetch_types: false });
    try {
      await sql` + "`create table items_postgres (id serial primary key, name text not null)`" + `;
      await sql` + "`insert into items_postgres (name) values (${'apple'}), (${'pear'})`" + `;
      const rows = await sql` + "`select name, current_database() as db, current_user as who from items_postgres order by id`" + `;
      return Response.json({ names: rows.map((r) => r.name), db: rows[0].db, who: rows[0].who,
        host: env.HYPERDRIVE.host, port: env.HYPERDRIVE.port, user: env.HYPERDRIVE.user, database: env.HYPERDRIVE.database });
    } catch (e) {
      return new Response("error " + e.message, { status: 500 });
    } finally {
      ctx.waitUntil(sql.end());
    }
  },
};
`,
	"pg": `import { Client } from "pg";
export default {
  async fetch(request, env, ctx) {
    const client = new Client({ connectionString: env.HYPERDRIVE.connectionString });
    try {
      await client.connect();
      await client.query("create table items_pg (id serial primary key, name text not null)");
      await client.query("insert into items_pg (name) values ($1), ($2)", ["apple", "pear"]);
      const { rows } = await client.query("select name, current_database() as db, current_user as who from items_pg order by id");
      return Response.json({ names: rows.map((r) => r.name), db: rows[0].db, who: rows[0].who,
        host: env.HYPERDRIVE.host, port: env.HYPERDRIVE.port, user: env.HYPERDRIVE.user, database: env.HYPERDRIVE.database });
    } catch (e) {
      return new Response("error " + e.message, { status: 500 });
    } finally {
      ctx.waitUntil(client.end());
    }
  },
};
`,
}

// TestHyperdrivePostgres: a Worker with a hyperdrive binding runs queries on a real
// PostgreSQL through the pinned workerd, with the postgres driver bundled as a template
// would (esbuild); the credentials come from the Secret's files, never the config.
func TestHyperdrivePostgres(t *testing.T) {
	pg := testenv.StartPostgres(t, "")
	for _, driver := range []string{"postgres", "pg"} {
		t.Run(driver, func(t *testing.T) {
			got := runHyperdriveWorker(t, pg, hyperdriveWorkers[driver])
			want := `{"names":["apple","pear"],"db":"shop","who":"worker","host":`
			if !strings.HasPrefix(got, want) || !strings.Contains(got, `"port":5432,"user":"worker","database":"shop"`) {
				t.Errorf("got %s\nwant %s... with port 5432 (Hyperdrive's), user and database", got, want)
			}
		})
	}
}

// runHyperdriveWorker bundles source, renders it with a hyperdrive binding HYPERDRIVE to
// the Secret "pg" holding pg's address and credentials, runs it in the pinned workerd as
// a pod would (the Secret's files, the address by flag) and returns the body of GET /.
func runHyperdriveWorker(t *testing.T, pg *testenv.Postgres, source string) string {
	entry := filepath.Join(t.TempDir(), "index.js")
	if err := os.WriteFile(entry, []byte(source), 0o644); err != nil {
		t.Fatal(err)
	}
	bundle := testenv.Bundle(t, entry)
	w := &v1alpha1.Worker{ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: "ns"}, Spec: v1alpha1.WorkerSpec{
		CompatibilityDate: "2026-11-01", // nodejs_compat (with node:fs, which pg imports) is a default by then
		Bindings:          []v1alpha1.Binding{{Name: "HYPERDRIVE", Hyperdrive: &v1alpha1.HyperdriveBinding{SecretRef: v1alpha1.LocalObjectReference{Name: "pg"}}}},
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
	got := getBody(t, "http://"+l.Addrs[podcontract.HTTPSocket]+"/")
	if strings.HasPrefix(got, "error") {
		t.Logf("workerd:\n%s", l.Output())
	}
	return got
}
