package backup_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/workerd-operator/workerd-operator/internal/backup"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// storeWorker is a Worker whose Durable Object class Store keeps rows in SQLite
// (ctx.storage.sql) on localDisk: /put?obj=&k=&v= and /get?obj=&k=; /setalarm?obj=&v=
// (unix ms), /getalarm?obj= and /alarms?obj= (how many times its alarm ran).
const storeWorker = `
import { DurableObject } from "cloudflare:workers";
export class Store extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS kv (k TEXT PRIMARY KEY, v TEXT)");
  }
  async fetch(req) {
    const u = new URL(req.url);
    const k = u.searchParams.get("k");
    if (u.pathname === "/fill") {
      // n rows of size random bytes each: incompressible, as user data may be.
      const n = Number(u.searchParams.get("n")), size = Number(u.searchParams.get("size"));
      this.ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS blobs (i INTEGER PRIMARY KEY, b BLOB)");
      for (let i = 0; i < n; i++) {
        const b = new Uint8Array(size);
        for (let o = 0; o < size; o += 65536) crypto.getRandomValues(b.subarray(o, Math.min(size, o + 65536)));
        this.ctx.storage.sql.exec("INSERT INTO blobs (b) VALUES (?)", b.buffer);
      }
      return new Response("ok");
    }
    if (u.pathname === "/digest") {
      // Everything the object holds, as text: its rows and a checksum of its blobs.
      this.ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS blobs (i INTEGER PRIMARY KEY, b BLOB)");
      const kv = this.ctx.storage.sql.exec("SELECT k, v FROM kv ORDER BY k").toArray().map((r) => r.k + "=" + r.v).join(",");
      let sum = 0, n = 0;
      for (const r of this.ctx.storage.sql.exec("SELECT b FROM blobs ORDER BY i")) {
        const b = new Uint8Array(r.b);
        for (let i = 0; i < b.length; i += 997) sum = (sum * 31 + b[i]) >>> 0;
        n++;
      }
      return new Response(kv + " blobs=" + n + " sum=" + sum);
    }
    if (u.pathname === "/setalarm") {
      await this.ctx.storage.setAlarm(Number(u.searchParams.get("v")));
      return new Response("ok");
    }
    if (u.pathname === "/getalarm") {
      return new Response(String(await this.ctx.storage.getAlarm()));
    }
    if (u.pathname === "/alarms") {
      return new Response(String((await this.ctx.storage.get("alarms")) ?? 0));
    }
    if (u.pathname === "/put") {
      this.ctx.storage.sql.exec("INSERT OR REPLACE INTO kv VALUES (?, ?)", k, u.searchParams.get("v"));
      return new Response("ok");
    }
    const rows = this.ctx.storage.sql.exec("SELECT v FROM kv WHERE k = ?", k).toArray();
    return new Response(rows.length ? rows[0].v : "<none>");
  }
  async alarm() {
    await this.ctx.storage.put("alarms", ((await this.ctx.storage.get("alarms")) ?? 0) + 1);
  }
}
export default {
  fetch(req, env) {
    const obj = new URL(req.url).searchParams.get("obj");
    return env.STORE.get(env.STORE.idFromName(obj)).fetch(req);
  },
};
`

const storeConfig = `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [
    (name = "main", worker = .w),
    (name = "disk", disk = (path = %q, writable = true)),
  ],
  sockets = [(name = "http", address = %q, http = (), service = "main")],
);
const w :Workerd.Worker = (
  compatibilityDate = "2025-01-01",
  modules = [(name = "main.js", esModule = embed "main.js")],
  durableObjectNamespaces = [(className = "Store", uniqueKey = "store-key", enableSql = true)],
  durableObjectStorage = (localDisk = "disk"),
  bindings = [(name = "STORE", durableObjectNamespace = "Store")],
);
`

// workerd runs storeWorker with its Durable Object storage in dataDir until stop.
type workerd struct {
	addr string
	cmd  *exec.Cmd
}

func startWorkerd(t testing.TB, dataDir string) *workerd {
	t.Helper()
	dir := t.TempDir()
	addr := testenv.FreeLoopbackAddr(t)
	must(t, os.WriteFile(filepath.Join(dir, "main.js"), []byte(storeWorker), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "config.capnp"), []byte(fmt.Sprintf(storeConfig, dataDir, addr)), 0o644))
	cmd := exec.Command(testenv.WorkerdBinary(t), "serve", "config.capnp", "--experimental")
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, os.Stderr, os.Stderr
	must(t, cmd.Start())
	w := &workerd{addr: addr, cmd: cmd}
	t.Cleanup(w.stop)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := http.Get("http://" + addr + "/get?obj=probe&k=x"); err == nil {
			return w
		}
		if time.Now().After(deadline) {
			t.Fatal("workerd does not answer")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (w *workerd) stop() {
	if w.cmd.ProcessState == nil {
		_ = w.cmd.Process.Kill()
		_ = w.cmd.Wait()
	}
}

func (w *workerd) call(t testing.TB, path string) string {
	t.Helper()
	resp, err := http.Get("http://" + w.addr + path)
	must(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return string(b)
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func target(s testenv.S3, prefix string) backup.Target {
	return backup.Target{Endpoint: s.Endpoint, Bucket: "backups", Prefix: prefix,
		AccessKeyID: s.AccessKeyID, SecretAccessKey: s.SecretAccessKey}
}

// TestRestoreAfterDiskLoss: rows written through a running workerd are in the bucket
// once Sync returns; a new, empty directory restored from it serves every row, and
// the restored store keeps shipping from where the lost one stopped.
func TestRestoreAfterDiskLoss(t *testing.T) {
	s3 := testenv.StartS3(t, "backups")
	ctx := context.Background()
	tg := target(s3, "ns/dons/orders")
	data, state := t.TempDir(), t.TempDir()
	w := startWorkerd(t, data)
	for i := range 20 {
		w.call(t, fmt.Sprintf("/put?obj=o%d&k=k&v=v%d", i%4, i))
	}
	r, err := backup.Start(ctx, backup.Options{Target: tg, Dir: data, StateDir: state}, testr.New(t))
	must(t, err)
	w.call(t, "/put?obj=o0&k=late&v=after-start")
	waitShipped(t, r, 6)
	must(t, r.Close(ctx))
	w.stop()

	// The disk is lost: a new directory, restored before workerd starts.
	fresh := t.TempDir()
	n, err := backup.Restore(ctx, tg, fresh, backup.RestoreOptions{}, testr.New(t))
	must(t, err)
	if n != 6 { // o0..o3, startWorkerd's probe object and the namespace's metadata.sqlite
		t.Errorf("restored %d databases, want 6", n)
	}
	w2 := startWorkerd(t, fresh)
	for i := 16; i < 20; i++ {
		if got, want := w2.call(t, fmt.Sprintf("/get?obj=o%d&k=k", i%4)), fmt.Sprintf("v%d", i); got != want {
			t.Errorf("object o%d after restore: %q, want %q", i%4, got, want)
		}
	}
	if got := w2.call(t, "/get?obj=o0&k=late"); got != "after-start" {
		t.Errorf("row written after the replicator started: %q, want after-start", got)
	}
	// Shipping resumes on the restored directory with new state: the next write reaches
	// the bucket, and a second restore holds it.
	r2, err := backup.Start(ctx, backup.Options{Target: tg, Dir: fresh, StateDir: t.TempDir()}, testr.New(t))
	must(t, err)
	w2.call(t, "/put?obj=o1&k=k&v=second-life")
	waitShipped(t, r2, 6)
	must(t, r2.Sync(ctx))
	must(t, r2.Close(ctx))
	again := t.TempDir()
	_, err = backup.Restore(ctx, tg, again, backup.RestoreOptions{}, testr.New(t))
	must(t, err)
	w2.stop()
	w3 := startWorkerd(t, again)
	if got := w3.call(t, "/get?obj=o1&k=k"); got != "second-life" {
		t.Errorf("write after the restore, restored again: %q, want second-life", got)
	}
}

// waitShipped waits until want databases are shipped with nothing pending.
func waitShipped(t testing.TB, r *backup.Replicator, want int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := r.Sync(context.Background())
		ps := r.Positions()
		pending := 0
		for _, p := range ps {
			if p.Pending {
				pending++
			}
		}
		if err == nil && len(ps) >= want && pending == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("shipped %v (want %d databases, none pending): %v", ps, want, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestShippedAndBoundedClose: Status().Shipped is false until a pass completes and true
// after; a replicator whose bucket is unreachable is closed within its context (the
// background first pass is cancelled by the stop) and says the final pass failed.
func TestShippedAndBoundedClose(t *testing.T) {
	s3 := testenv.StartS3(t, "backups")
	ctx := context.Background()
	data := t.TempDir()
	w := startWorkerd(t, data)
	w.call(t, "/put?obj=o1&k=k&v=v")
	r, err := backup.Start(ctx, backup.Options{Target: target(s3, "ns/shipped"), Dir: data, StateDir: t.TempDir(), Background: true}, testr.New(t))
	must(t, err)
	waitShipped(t, r, 1)
	if !r.Status().Shipped {
		t.Errorf("Status().Shipped false after a completed pass")
	}
	must(t, r.Close(ctx))

	gone := target(s3, "ns/gone")
	gone.Endpoint = "http://127.0.0.1:1" // nothing listens: every upload fails and is retried
	r2, err := backup.Start(ctx, backup.Options{Target: gone, Dir: data, StateDir: t.TempDir(), Background: true}, testr.New(t))
	must(t, err)
	if r2.Status().Shipped {
		t.Errorf("Status().Shipped true before any pass completed")
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := r2.Close(cctx); err == nil {
		t.Errorf("Close with the bucket unreachable: nil, want the final pass's error")
	}
	w.stop()
}
