package render

import (
	"fmt"
	"strings"
)

// capnp writes Cap'n Proto text one line at a time, two spaces per nesting level, so
// the config's layout lives in the structure of the code that writes it.
type capnp struct {
	b     strings.Builder
	depth int
}

// line writes the concatenated parts as one line at the current depth.
func (c *capnp) line(parts ...string) {
	c.b.WriteString(strings.Repeat("  ", c.depth))
	for _, p := range parts {
		c.b.WriteString(p)
	}
	c.b.WriteByte('\n')
}

// open writes a line that opens a nested block; close ends it.
func (c *capnp) open(parts ...string) {
	c.line(parts...)
	c.depth++
}

func (c *capnp) close(s string) {
	c.depth--
	c.line(s)
}

// field writes "name = value,".
func (c *capnp) field(name, value string) { c.line(kv(name, value), ",") }

// item writes one list element "(a = x, b = y),".
func (c *capnp) item(fields ...string) { c.line(tuple(fields...), ",") }

// openWorker opens a worker service "(name = <name>, worker = (", closed by closeWorker.
func (c *capnp) openWorker(name string) { c.open("(", named(name), ", worker = (") }

func (c *capnp) closeWorker() { c.close(")),") }

// splice appends text another writer produced (at the depth it was written for).
func (c *capnp) splice(o *capnp) { c.b.WriteString(o.b.String()) }

func (c *capnp) String() string { return c.b.String() }

// kv is "name = value".
func kv(name, value string) string { return name + " = " + value }

// named is `name = "<n>"`, the first field of services, sockets, bindings and modules.
func named(n string) string { return kv("name", Quote(n)) }

// tuple is "(a, b)" of its fields.
func tuple(fields ...string) string { return "(" + strings.Join(fields, ", ") + ")" }

// list is "[a, b]" of its items.
func list(items ...string) string { return "[" + strings.Join(items, ", ") + "]" }

// embed is `embed "<path>"`: a file workerd reads relative to the config.
func embed(path string) string { return "embed " + Quote(path) }

// Quote returns s as a Cap'n Proto text literal: double-quoted, with \" \\ \n \r \t
// and \xHH for other control bytes; UTF-8 passes through.
func Quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if c < 0x20 || c == 0x7f {
				fmt.Fprintf(&b, `\x%02x`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}
