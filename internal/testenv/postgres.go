package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/workerd-operator/workerd-operator/internal/toolchain"
)

// Postgres is a real PostgreSQL server a test started (StartPostgres).
type Postgres struct {
	Host, Port, Database, User, Password string
}

// StartPostgres starts Debian's PostgreSQL (hack/install-postgres.sh) on host (""
// means 127.0.0.1; any loopback address works on Linux) and a free port with a fresh data directory, a password user and a database, and stops it
// when t ends. As root the server runs as the postgres user (it refuses root). Without
// PostgreSQL, and not root to install it, the test is skipped.
func StartPostgres(t testing.TB, host string) *Postgres {
	t.Helper()
	bin, err := toolchain.PostgresBin()
	if err != nil {
		t.Fatal(err)
	}
	if bin == "" {
		t.Skip("PostgreSQL is not installed and this is not root (run make tools as root, or apt-get install postgresql)")
	}
	cred, owner := postgresUser(t)
	dir, err := os.MkdirTemp("", "workerd-operator-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if host == "" {
		host = "127.0.0.1"
	}
	pg := &Postgres{Host: host, Database: "shop", User: "worker", Password: "pw-" + strconv.Itoa(os.Getpid())}
	pwfile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwfile, []byte(pg.Password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if owner != nil {
		if err := chownAll(dir, owner); err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(dir, "data")
	run := func(name string, args ...string) *exec.Cmd {
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
		cmd.Env = append(os.Environ(), "PGPASSWORD="+pg.Password)
		return cmd
	}
	if out, err := run("initdb", "-D", data, "-U", pg.User, "--pwfile", pwfile, "--auth", "scram-sha-256", "-E", "UTF8").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	pg.Port = freePort(t, pg.Host)
	srv := run("postgres", "-D", data, "-h", pg.Host, "-p", pg.Port, "-k", dir)
	log := &strings.Builder{}
	srv.Stdout, srv.Stderr = log, log
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Signal(syscall.SIGINT); _ = srv.Wait() })
	waitPostgres(t, run, pg, log)
	if out, err := run("createdb", "-h", pg.Host, "-p", pg.Port, "-U", pg.User, pg.Database).CombinedOutput(); err != nil {
		t.Fatalf("createdb: %v\n%s", err, out)
	}
	return pg
}

// postgresUser is the identity the server runs as: the postgres user when root.
func postgresUser(t testing.TB) (*syscall.Credential, *user.User) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Fatalf("running as root needs the postgres user of the postgresql package: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, u
}

func chownAll(dir string, u *user.User) error {
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Chown(p, uid, gid)
	})
}

func freePort(t testing.TB, host string) string {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// waitPostgres waits until the server accepts connections (pg_isready), at most a minute.
func waitPostgres(t testing.TB, run func(string, ...string) *exec.Cmd, pg *Postgres, log fmt.Stringer) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for ctx.Err() == nil {
		if run("pg_isready", "-h", pg.Host, "-p", pg.Port).Run() == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("PostgreSQL did not start:\n%s", log.String())
}

// Bundle bundles the ES module entry (a file importing npm packages of the cache's
// node_modules, e.g. "postgres" or "pg") into one ES module for workerd with the cached
// esbuild (hack/install-npm-tools.sh) as wrangler does for nodejs_compat Workers
// (hack/bundle-worker.mjs), and returns its text.
func Bundle(t testing.TB, entry string) string {
	t.Helper()
	dir, err := toolchain.NPMTools()
	if err != nil {
		t.Fatal(err)
	}
	root, err := toolchain.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "bundle.js")
	cmd := exec.Command("node", filepath.Join(root, "hack", "bundle-worker.mjs"), entry, out)
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("bundle %s: %v\n%s", entry, err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
