package devcluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"math"
	"os"
	"sync"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node/api"
)

// Container logs are files in the CRI logging format the kubelet reads on a node
// (https://github.com/kubernetes/design-proposals-archive/blob/main/node/kubelet-cri-logging.md):
// one entry per line, "<RFC3339Nano> <stdout|stderr> <F|P> <content>", P marking a
// partial line (a long line split, or output that did not end in a newline). The time
// of each line is what serves sinceTime, sinceSeconds and timestamps as a kubelet does.

// maxLogLine is where a line is split into partial entries (containerd's 16 KiB).
const maxLogLine = 16 << 10

// logSink writes a process's stdout and stderr into a CRI log file.
type logSink struct {
	mu sync.Mutex
	f  *os.File
	wg sync.WaitGroup
}

// newLogSink opens (appends to) the log file at path.
func newLogSink(path string) (*logSink, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &logSink{f: f}, nil
}

// pipe returns the write end of a pipe whose output becomes entries of stream; the
// caller gives it to the process and closes its own copy once the process started.
func (s *logSink) pipe(stream string) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer r.Close()
		br := bufio.NewReaderSize(r, maxLogLine)
		for {
			line, err := br.ReadSlice('\n')
			if len(line) > 0 {
				s.write(stream, line)
			}
			if err != nil && err != bufio.ErrBufferFull {
				return
			}
		}
	}()
	return w, nil
}

// write appends one entry: F for a line ending in a newline, else P.
func (s *logSink) write(stream string, content []byte) {
	tag := " F "
	if content[len(content)-1] != '\n' {
		tag = " P "
	}
	var b bytes.Buffer
	b.WriteString(time.Now().UTC().Format(time.RFC3339Nano))
	b.WriteString(" " + stream + tag)
	b.Write(content)
	if tag == " P " {
		b.WriteByte('\n')
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _ = s.f.Write(b.Bytes())
}

// drain waits until every pipe reached its end (the process, and anything that
// inherited its output, exited), at most d, and closes the file when they have.
func (s *logSink) drain(d time.Duration) {
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		s.f.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(d):
	}
}

// logEntry is one parsed entry of a CRI log file.
type logEntry struct {
	at      time.Time
	stream  string
	content []byte // with its newline, unless partial
}

// parseLogEntry parses one line of a CRI log file (without its newline); false for a
// line that is not an entry (the kubelet skips those too).
func parseLogEntry(line []byte) (logEntry, bool) {
	fields := bytes.SplitN(line, []byte(" "), 4)
	if len(fields) != 4 {
		return logEntry{}, false
	}
	at, err := time.Parse(time.RFC3339Nano, string(fields[0]))
	if err != nil {
		return logEntry{}, false
	}
	e := logEntry{at: at, stream: string(fields[1]), content: fields[3]}
	if string(fields[2]) == "F" {
		e.content = append(e.content[:len(e.content):len(e.content)], '\n')
	}
	return e, true
}

// logContent is the text of a CRI log file: its entries' contents, in order.
func logContent(b []byte) []byte {
	var out []byte
	for _, line := range bytes.SplitAfter(b, []byte("\n")) {
		if e, ok := parseLogEntry(bytes.TrimSuffix(line, []byte("\n"))); ok {
			out = append(out, e.content...)
		}
	}
	return out
}

// logWriter applies the options that act per entry, as the kubelet does: entries before
// since are skipped, timestamps prefix each entry's time, and output stops after
// LimitBytes (cutting the last entry).
type logWriter struct {
	w          io.Writer
	since      time.Time
	timestamps bool
	remain     int
}

// write writes e; false once the byte limit is reached (or the writer failed).
func (lw *logWriter) write(e logEntry) bool {
	if e.at.Before(lw.since) {
		return true
	}
	out := e.content
	if lw.timestamps {
		out = append([]byte(e.at.Format(time.RFC3339Nano)+" "), out...)
	}
	if len(out) > lw.remain {
		out = out[:lw.remain]
	}
	n, err := lw.w.Write(out)
	lw.remain -= n
	return err == nil && lw.remain > 0
}

// writeLines writes the complete lines of b through lw and returns how many bytes it
// consumed (an incomplete last line is left) and whether to go on.
func (lw *logWriter) writeLines(b []byte) (int, bool) {
	used := 0
	for {
		i := bytes.IndexByte(b[used:], '\n')
		if i < 0 {
			return used, true
		}
		line := b[used : used+i]
		used += i + 1
		if e, ok := parseLogEntry(line); ok && !lw.write(e) {
			return used, false
		}
	}
}

// openLog returns a container's CRI log file as `kubectl logs` serves it: the last
// Tail entries, from SinceTime (or SinceSeconds ago), with Timestamps, at most
// LimitBytes, and with Follow, new output until the container stops or ctx ends.
func openLog(ctx context.Context, file string, opts api.ContainerLogOpts, running func() bool) (io.ReadCloser, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	offset := len(b)
	b = b[tailStart(b, opts.Tail):]
	lw := &logWriter{since: opts.SinceTime, timestamps: opts.Timestamps, remain: math.MaxInt}
	if opts.SinceSeconds > 0 {
		lw.since = time.Now().Add(-time.Duration(opts.SinceSeconds) * time.Second)
	}
	if opts.LimitBytes > 0 {
		lw.remain = opts.LimitBytes
	}
	if !opts.Follow {
		var out bytes.Buffer
		lw.w = &out
		lw.writeLines(b)
		return io.NopCloser(&out), nil
	}
	pr, pw := io.Pipe()
	lw.w = pw
	go func() {
		defer pw.Close()
		used, more := lw.writeLines(b)
		if more {
			followLog(ctx, file, int64(offset-(len(b)-used)), lw, running)
		}
	}()
	return pr, nil
}

// followLog writes the entries appended to file from offset on through lw until the
// container stops (and its output is read), the limit is reached or ctx ends.
func followLog(ctx context.Context, file string, offset int64, lw *logWriter, running func() bool) {
	f, err := os.Open(file)
	if err != nil {
		return
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return
	}
	var pending []byte
	buf := make([]byte, 32*1024)
	for {
		n, _ := f.Read(buf)
		if n > 0 {
			pending = append(pending, buf[:n]...)
			used, more := lw.writeLines(pending)
			if !more {
				return
			}
			pending = pending[used:]
			continue
		}
		if !running() || ctx.Err() != nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// tailStart is the index in b of the first of its last n complete lines (0 when n <= 0
// or b has no more); an incomplete last line does not count, as for the kubelet.
func tailStart(b []byte, n int) int {
	if n <= 0 {
		return 0
	}
	end := bytes.LastIndexByte(b, '\n')
	for i := end - 1; i >= 0; i-- {
		if b[i] == '\n' {
			if n--; n == 0 {
				return i + 1
			}
		}
	}
	return 0
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// kubeconfigVolume is the internal volume key of the pod's generated kubeconfig.
const kubeconfigVolume = "\x00kubeconfig"
