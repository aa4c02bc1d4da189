package testenv

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// fakeVocab is a three-token tokenizer in GGUF key/values, with a general.* key the
// model must not copy.
func fakeVocab() []ggufKV {
	arr := func(typ uint32, items ...[]byte) []byte {
		b := append(le32(typ), le64(uint64(len(items)))...)
		for _, it := range items {
			b = append(b, it...)
		}
		return b
	}
	return []ggufKV{
		ggufStr("general.name", "vocab"),
		ggufStr("tokenizer.ggml.model", "llama"),
		{"tokenizer.ggml.tokens", ggufArray, arr(ggufString, ggufStrBytes("<unk>"), ggufStrBytes("<s>"), ggufStrBytes("</s>"))},
		{"tokenizer.ggml.scores", ggufArray, arr(ggufFloat32, le32(0), le32(0), le32(0))},
		{"tokenizer.ggml.bos_token_id", ggufUint32, le32(1)},
	}
}

func TestGGUFKVsRoundTrip(t *testing.T) {
	var b bytes.Buffer
	if err := writeGGUF(&b, fakeVocab(), nil, 1); err != nil {
		t.Fatal(err)
	}
	got, err := readGGUFKVs(&b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, fakeVocab()) {
		t.Fatalf("read back %+v", got)
	}
}

// TestTinyLlamaLayout checks what llama.cpp's loader relies on: the tokenizer is
// copied, the tensor data starts aligned right after the infos, each tensor at its
// aligned offset, and the same parameters give the same bytes.
func TestTinyLlamaLayout(t *testing.T) {
	p := TinyLlama{Embd: 8, Layers: 1, Heads: 2, FF: 16, Context: 64, Seed: 7}
	var file bytes.Buffer
	if err := writeTinyLlama(&file, fakeVocab(), p); err != nil {
		t.Fatal(err)
	}
	src := bytes.NewReader(file.Bytes())
	br := bufio.NewReader(src)
	kvs, err := readGGUFKVs(br)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"general.architecture": "llama", "general.name": "tiny-llama", "tokenizer.ggml.model": "llama", "tokenizer.chat_template": tinyLlamaChatTemplate}
	for _, kv := range kvs {
		if w, ok := want[kv.Key]; ok {
			if !bytes.Equal(kv.Raw, ggufStrBytes(w)) {
				t.Errorf("%s = %q, want %q", kv.Key, kv.Raw, w)
			}
			delete(want, kv.Key)
		}
	}
	if len(want) != 0 {
		t.Errorf("missing keys %v", want)
	}
	if n, err := ggufArrayLen(kvs, "tokenizer.ggml.tokens"); err != nil || n != 3 {
		t.Errorf("tokens: %d, %v", n, err)
	}
	tensors := tinyLlamaTensors(p, 3)
	var next uint64
	for _, tt := range tensors {
		name, _ := readGGUFString(br)
		var nd uint32
		_ = binary.Read(br, binary.LittleEndian, &nd)
		dims := make([]uint64, nd)
		var typ uint32
		var off uint64
		_ = binary.Read(br, binary.LittleEndian, dims)
		_ = binary.Read(br, binary.LittleEndian, &typ)
		if err := binary.Read(br, binary.LittleEndian, &off); err != nil {
			t.Fatal(err)
		}
		if name != tt.Name || !reflect.DeepEqual(dims, tt.Dims) || typ != ggmlF32 || off != next {
			t.Fatalf("tensor info %s %v type %d at %d, want %s %v at %d", name, dims, typ, off, tt.Name, tt.Dims, next)
		}
		next += alignUp(4 * tt.elems())
	}
	consumed := uint64(file.Len() - src.Len() - br.Buffered())
	if size := alignUp(consumed) + next; size != uint64(file.Len()) {
		t.Fatalf("file is %d bytes, want %d", file.Len(), size)
	}
	data := file.Bytes()[alignUp(consumed):]
	if v := math.Float32frombits(binary.LittleEndian.Uint32(data)); v == 0 || math.Abs(float64(v)) > 1/math.Sqrt(8) {
		t.Errorf("token_embd[0] = %v", v)
	}
	var again bytes.Buffer
	_ = writeTinyLlama(&again, fakeVocab(), p)
	if !bytes.Equal(file.Bytes(), again.Bytes()) {
		t.Error("the same parameters wrote different bytes")
	}
}

func TestTinyLlamaModelCached(t *testing.T) {
	dir := t.TempDir()
	vocab := filepath.Join(dir, "vocab.gguf")
	var b bytes.Buffer
	if err := writeGGUF(&b, fakeVocab(), nil, 1); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(vocab, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	p := TinyLlama{Embd: 8, Layers: 1, Heads: 2, FF: 16, Context: 64, Seed: 7}
	first, err := TinyLlamaModel(dir, vocab, p)
	if err != nil {
		t.Fatal(err)
	}
	second, err := TinyLlamaModel(dir, vocab, p)
	if err != nil || second != first {
		t.Fatalf("second call: %s, %v; want %s", second, err, first)
	}
	p.Seed++
	if other, _ := TinyLlamaModel(dir, vocab, p); other == first {
		t.Fatal("another seed reused the model file")
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".tiny-llama-*")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}
