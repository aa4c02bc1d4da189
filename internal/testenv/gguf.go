package testenv

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// A tiny LLaMA-architecture model for llama-server: no pre-trained GGUF is reachable
// from the machines, so the tests generate one with pseudo-random weights (fixed seed,
// so its answers are deterministic) and the real LLaMA tokenizer of llama.cpp's
// ggml-vocab-llama-spm.gguf. It talks nonsense, through the real inference path.

// TinyLlama is the shape of the generated model.
type TinyLlama struct {
	Embd, Layers, Heads, FF, Context int
	Seed                             uint64
}

// TinyLlamaEmbd is n_embd of DefaultTinyLlama: the length of its embedding vectors.
const TinyLlamaEmbd = 64

// DefaultTinyLlama is the model StartLlamaServer serves (about 8 MiB with the vocabulary).
var DefaultTinyLlama = TinyLlama{Embd: TinyLlamaEmbd, Layers: 2, Heads: 4, FF: 128, Context: 2048, Seed: 0x5eed}

// tinyLlamaChatTemplate is a ChatML template, so /v1/chat/completions can render
// messages; the vocabulary has no chat tokens, so its markers are plain text.
const tinyLlamaChatTemplate = `{%- for message in messages -%}
{{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|im_start|>assistant\n' -}}
{%- endif -%}`

// GGUF value types and constants (ggml/include/gguf.h).
const (
	ggufMagic   = "GGUF"
	ggufVersion = 3
	ggufAlign   = 32 // general.alignment's default
	ggufUint32  = 4
	ggufFloat32 = 6
	ggufString  = 8
	ggufArray   = 9
	ggmlF32     = 0
)

// ggufKV is one metadata key/value; Raw is the encoded value after its type, so
// values read from one file are written to another unchanged.
type ggufKV struct {
	Key  string
	Type uint32
	Raw  []byte
}

// ggufTensor is one F32 tensor; Dims are ggml's ne (innermost first). Norm weights
// are ones, the others uniform in ±1/sqrt(Dims[0]).
type ggufTensor struct {
	Name string
	Dims []uint64
	Norm bool
}

func (t ggufTensor) elems() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// TinyLlamaModel writes the model of p with the tokenizer of the vocabulary file vocab
// into dir once (named by a hash of both, so a changed generator or vocabulary makes a
// new file) and returns its path. Concurrent writers each rename a complete file.
func TinyLlamaModel(dir, vocab string, p TinyLlama) (string, error) {
	vb, err := os.ReadFile(vocab)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "tiny-llama v1 %+v %s\n", p, tinyLlamaChatTemplate)
	h.Write(vb)
	path := filepath.Join(dir, "tiny-llama-"+hex.EncodeToString(h.Sum(nil))[:16]+".gguf")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	kvs, err := readGGUFKVs(bytes.NewReader(vb))
	if err != nil {
		return "", fmt.Errorf("%s: %w", vocab, err)
	}
	f, err := os.CreateTemp(dir, ".tiny-llama-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	w := bufio.NewWriterSize(f, 1<<20)
	err = writeTinyLlama(w, kvs, p)
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644) // CreateTemp makes it 0600
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	return path, err
}

// writeTinyLlama writes the GGUF of p, taking the tokenizer.* keys of vocab.
func writeTinyLlama(w io.Writer, vocab []ggufKV, p TinyLlama) error {
	nVocab, err := ggufArrayLen(vocab, "tokenizer.ggml.tokens")
	if err != nil {
		return err
	}
	u32 := func(k string, v int) ggufKV { return ggufKV{k, ggufUint32, le32(uint32(v))} }
	kvs := []ggufKV{
		ggufStr("general.architecture", "llama"),
		ggufStr("general.name", "tiny-llama"),
		u32("llama.context_length", p.Context),
		u32("llama.embedding_length", p.Embd),
		u32("llama.block_count", p.Layers),
		u32("llama.feed_forward_length", p.FF),
		u32("llama.attention.head_count", p.Heads),
		u32("llama.attention.head_count_kv", p.Heads),
		u32("llama.rope.dimension_count", p.Embd/p.Heads),
		u32("llama.vocab_size", int(nVocab)),
		{"llama.attention.layer_norm_rms_epsilon", ggufFloat32, le32(math.Float32bits(1e-5))},
		{"llama.rope.freq_base", ggufFloat32, le32(math.Float32bits(10000))},
	}
	for _, kv := range vocab {
		if strings.HasPrefix(kv.Key, "tokenizer.") && kv.Key != "tokenizer.chat_template" {
			kvs = append(kvs, kv)
		}
	}
	kvs = append(kvs, ggufStr("tokenizer.chat_template", tinyLlamaChatTemplate))
	return writeGGUF(w, kvs, tinyLlamaTensors(p, nVocab), p.Seed)
}

// tinyLlamaTensors lists the tensors llama.cpp's llama architecture loads; the output
// projection is left out, so it is tied to token_embd.
func tinyLlamaTensors(p TinyLlama, nVocab uint64) []ggufTensor {
	e, ff := uint64(p.Embd), uint64(p.FF)
	ts := []ggufTensor{
		{Name: "token_embd.weight", Dims: []uint64{e, nVocab}},
		{Name: "output_norm.weight", Dims: []uint64{e}, Norm: true},
	}
	for i := 0; i < p.Layers; i++ {
		b := fmt.Sprintf("blk.%d.", i)
		ts = append(ts,
			ggufTensor{Name: b + "attn_norm.weight", Dims: []uint64{e}, Norm: true},
			ggufTensor{Name: b + "attn_q.weight", Dims: []uint64{e, e}},
			ggufTensor{Name: b + "attn_k.weight", Dims: []uint64{e, e}},
			ggufTensor{Name: b + "attn_v.weight", Dims: []uint64{e, e}},
			ggufTensor{Name: b + "attn_output.weight", Dims: []uint64{e, e}},
			ggufTensor{Name: b + "ffn_norm.weight", Dims: []uint64{e}, Norm: true},
			ggufTensor{Name: b + "ffn_gate.weight", Dims: []uint64{e, ff}},
			ggufTensor{Name: b + "ffn_up.weight", Dims: []uint64{e, ff}},
			ggufTensor{Name: b + "ffn_down.weight", Dims: []uint64{ff, e}},
		)
	}
	return ts
}

// writeGGUF writes a GGUF v3 file: header, key/values, tensor infos, then the tensors'
// data, each aligned to ggufAlign, filled from a splitmix64 stream seeded with seed.
func writeGGUF(w io.Writer, kvs []ggufKV, tensors []ggufTensor, seed uint64) error {
	var hdr bytes.Buffer
	hdr.WriteString(ggufMagic)
	hdr.Write(le32(ggufVersion))
	hdr.Write(le64(uint64(len(tensors))))
	hdr.Write(le64(uint64(len(kvs))))
	for _, kv := range kvs {
		hdr.Write(ggufStrBytes(kv.Key))
		hdr.Write(le32(kv.Type))
		hdr.Write(kv.Raw)
	}
	var off uint64
	for _, t := range tensors {
		hdr.Write(ggufStrBytes(t.Name))
		hdr.Write(le32(uint32(len(t.Dims))))
		for _, d := range t.Dims {
			hdr.Write(le64(d))
		}
		hdr.Write(le32(ggmlF32))
		hdr.Write(le64(off))
		off += alignUp(4 * t.elems())
	}
	hdr.Write(make([]byte, alignUp(uint64(hdr.Len()))-uint64(hdr.Len())))
	if _, err := w.Write(hdr.Bytes()); err != nil {
		return err
	}
	rng := splitmix64(seed)
	for _, t := range tensors {
		if err := writeTensorData(w, t, &rng); err != nil {
			return err
		}
	}
	return nil
}

func writeTensorData(w io.Writer, t ggufTensor, rng *splitmix64) error {
	n := t.elems()
	scale := float32(1 / math.Sqrt(float64(t.Dims[0])))
	buf := make([]byte, alignUp(4*n))
	for i := uint64(0); i < n; i++ {
		v := float32(1)
		if !t.Norm {
			// The top 24 bits as a float in [-1, 1).
			v = (float32(rng.next()>>40)/(1<<23) - 1) * scale
		}
		binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(v))
	}
	_, err := w.Write(buf)
	return err
}

// splitmix64 is a tiny fixed PRNG: math/rand's streams may change between Go releases.
type splitmix64 uint64

func (s *splitmix64) next() uint64 {
	*s += 0x9e3779b97f4a7c15
	z := uint64(*s)
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// readGGUFKVs reads the key/values of a GGUF (v2 or v3) file, stopping before its
// tensor infos.
func readGGUFKVs(r io.Reader) ([]ggufKV, error) {
	br := bufio.NewReader(r)
	var hdr struct {
		Magic         [4]byte
		Version       uint32
		NTensors, NKV uint64
	}
	if err := binary.Read(br, binary.LittleEndian, &hdr); err != nil {
		return nil, fmt.Errorf("gguf header: %w", err)
	}
	if string(hdr.Magic[:]) != ggufMagic || hdr.Version < 2 || hdr.Version > 3 {
		return nil, fmt.Errorf("not a GGUF v2/v3 file (magic %q, version %d)", hdr.Magic[:], hdr.Version)
	}
	if hdr.NKV > 1<<16 {
		return nil, fmt.Errorf("gguf: implausible key/value count %d", hdr.NKV)
	}
	kvs := make([]ggufKV, 0, hdr.NKV)
	for i := uint64(0); i < hdr.NKV; i++ {
		key, err := readGGUFString(br)
		if err != nil {
			return nil, err
		}
		var typ uint32
		if err := binary.Read(br, binary.LittleEndian, &typ); err != nil {
			return nil, err
		}
		var raw bytes.Buffer
		if err := skipGGUFValue(io.TeeReader(br, &raw), typ); err != nil {
			return nil, fmt.Errorf("gguf key %s: %w", key, err)
		}
		kvs = append(kvs, ggufKV{Key: key, Type: typ, Raw: raw.Bytes()})
	}
	return kvs, nil
}

// skipGGUFValue reads one value of type typ from r, which records its bytes.
func skipGGUFValue(r io.Reader, typ uint32) error {
	switch typ {
	case ggufString:
		_, err := readGGUFString(r)
		return err
	case ggufArray:
		var at uint32
		var n uint64
		if err := binary.Read(r, binary.LittleEndian, &at); err != nil {
			return err
		}
		if err := binary.Read(r, binary.LittleEndian, &n); err != nil {
			return err
		}
		if at == ggufArray || n > 1<<24 {
			return fmt.Errorf("unsupported array (of type %d, %d items)", at, n)
		}
		for j := uint64(0); j < n; j++ {
			if err := skipGGUFValue(r, at); err != nil {
				return err
			}
		}
		return nil
	}
	size, ok := map[uint32]int64{0: 1, 1: 1, 7: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 10: 8, 11: 8, 12: 8}[typ]
	if !ok {
		return fmt.Errorf("unknown value type %d", typ)
	}
	_, err := io.CopyN(io.Discard, r, size)
	return err
}

func readGGUFString(r io.Reader) (string, error) {
	var n uint64
	if err := binary.Read(r, binary.LittleEndian, &n); err != nil {
		return "", err
	}
	if n > 1<<24 {
		return "", fmt.Errorf("gguf: implausible string length %d", n)
	}
	b := make([]byte, n)
	_, err := io.ReadFull(r, b)
	return string(b), err
}

// ggufArrayLen is the item count of the array value of key.
func ggufArrayLen(kvs []ggufKV, key string) (uint64, error) {
	for _, kv := range kvs {
		if kv.Key == key && kv.Type == ggufArray && len(kv.Raw) >= 12 {
			return binary.LittleEndian.Uint64(kv.Raw[4:]), nil
		}
	}
	return 0, fmt.Errorf("gguf: no array %s", key)
}

func ggufStr(key, v string) ggufKV { return ggufKV{key, ggufString, ggufStrBytes(v)} }

func ggufStrBytes(s string) []byte { return append(le64(uint64(len(s))), s...) }

func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }

func le64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

func alignUp(n uint64) uint64 { return (n + ggufAlign - 1) / ggufAlign * ggufAlign }
