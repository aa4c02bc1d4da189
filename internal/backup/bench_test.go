package backup_test

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/minio/minio-go/v7"

	"github.com/workerd-operator/workerd-operator/internal/backup"
	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

// BenchmarkBackupOverhead: Durable Object writes through workerd with the store's
// backup off and on, alternating rounds in one run (docs/benchmarks.md, "Backup").
// Reports writes/s and p99 of each and their ratios, bytes shipped per write, and the
// time to restore a GiB.
func BenchmarkBackupOverhead(b *testing.B) {
	s3 := testenv.StartS3(b, "backups")
	ctx := context.Background()
	tg := target(s3, "bench/dons/writes")
	data := b.TempDir()
	w := startWorkerd(b, data)
	const rounds, per, clients = 3, 3 * time.Second, 8
	var off, on []result
	var shippedBytes int64
	var onWrites int
	for range b.N {
		for range rounds {
			off = append(off, load(b, w.addr, clients, per))
			r, err := backup.Start(ctx, backup.Options{Target: tg, Dir: data, StateDir: b.TempDir() + "/state"}, logr.Discard())
			if err != nil {
				b.Fatal(err)
			}
			_ = r.Sync(ctx) // the first sync snapshots every file: not a per-write cost
			base := bucketBytes(b, s3, tg)
			res := load(b, w.addr, clients, per)
			if err := r.Sync(ctx); err != nil {
				b.Fatal(err)
			}
			shippedBytes += bucketBytes(b, s3, tg) - base
			onWrites += res.n
			on = append(on, res)
			_ = r.Close(ctx)
		}
	}
	rOff, rOn := median(off), median(on)
	b.ReportMetric(rOff.rate, "writes/s-off")
	b.ReportMetric(rOn.rate, "writes/s-on")
	b.ReportMetric(rOn.rate/rOff.rate, "writes/s-on/off")
	b.ReportMetric(float64(rOff.p99.Microseconds())/1000, "p99-ms-off")
	b.ReportMetric(float64(rOn.p99.Microseconds())/1000, "p99-ms-on")
	b.ReportMetric(float64(rOn.p99)/float64(rOff.p99), "p99-on/off")
	b.ReportMetric(float64(shippedBytes)/float64(onWrites), "shipped-B/write")
	b.ReportMetric(restoreSecondsPerGiB(b, s3), "restore-s/GiB")
}

type result struct {
	n    int
	rate float64
	p99  time.Duration
}

// load runs clients writers for d, each writing rows to its own two objects.
func load(b *testing.B, addr string, clients int, d time.Duration) result {
	var mu sync.Mutex
	var lat []time.Duration
	var n atomic.Int64
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for i := 0; time.Now().Before(end); i++ {
				t0 := time.Now()
				resp, err := http.Get(fmt.Sprintf("http://%s/put?obj=o%d&k=k%d&v=value-%d", addr, c*2+i%2, i, i))
				if err != nil {
					b.Errorf("write: %v", err)
					return
				}
				if resp.StatusCode != 200 {
					body, _ := io.ReadAll(resp.Body)
					b.Errorf("write: %s: %s", resp.Status, body)
					return
				}
				resp.Body.Close()
				mine = append(mine, time.Since(t0))
				n.Add(1)
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	slices.Sort(lat)
	return result{n: int(n.Load()), rate: float64(n.Load()) / d.Seconds(), p99: lat[len(lat)*99/100]}
}

func median(rs []result) result {
	byRate := slices.Clone(rs)
	slices.SortFunc(byRate, func(a, b result) int { return int(a.rate - b.rate) })
	byP99 := slices.Clone(rs)
	slices.SortFunc(byP99, func(a, b result) int { return int(a.p99 - b.p99) })
	return result{rate: byRate[len(rs)/2].rate, p99: byP99[len(rs)/2].p99}
}

func bucketBytes(b *testing.B, s3 testenv.S3, tg backup.Target) int64 {
	var n int64
	for o := range s3.Client.ListObjects(context.Background(), tg.Bucket, minio.ListObjectsOptions{Prefix: tg.Prefix + "/", Recursive: true}) {
		if o.Err != nil {
			b.Fatal(o.Err)
		}
		n += o.Size
	}
	return n
}

// restoreSecondsPerGiB ships a store of 128 MiB of incompressible rows and times its
// restore into an empty directory.
func restoreSecondsPerGiB(b *testing.B, s3 testenv.S3) float64 {
	ctx := context.Background()
	tg := target(s3, "bench/dons/restore")
	data := b.TempDir()
	w := startWorkerd(b, data)
	for i := range 8 {
		w.call(b, fmt.Sprintf("/fill?obj=big%d&n=16&size=1048576", i))
	}
	r, err := backup.Start(ctx, backup.Options{Target: tg, Dir: data, StateDir: b.TempDir()}, logr.Discard())
	if err != nil {
		b.Fatal(err)
	}
	if err := r.Sync(ctx); err != nil {
		b.Fatal(err)
	}
	_ = r.Close(ctx)
	dir := b.TempDir()
	t0 := time.Now()
	if _, err := backup.Restore(ctx, tg, dir, backup.RestoreOptions{}, logr.Discard()); err != nil {
		b.Fatal(err)
	}
	took := time.Since(t0)
	size := dirBytes(b, dir)
	b.ReportMetric(float64(size)/(1<<20), "restored-MiB")
	return took.Seconds() / (float64(size) / (1 << 30))
}

func dirBytes(b *testing.B, dir string) int64 {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		i, err := d.Info()
		n += i.Size()
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}
