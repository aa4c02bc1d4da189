package channels_test

import (
	"encoding/json"
	"io"
	"testing"

	"github.com/workerd-operator/workerd-operator/internal/testenv"
)

func jsonDecode(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }

func freeAddr(t testing.TB) string { return testenv.FreeLoopbackAddr(t) }
