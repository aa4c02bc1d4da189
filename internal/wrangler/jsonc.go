package wrangler

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// decodeJSONC decodes JSON with comments ("//" to end of line, "/* ... */") and
// trailing commas before "]" or "}", as wrangler.jsonc allows. Numbers stay
// json.Number so that vars keep their exact text.
func decodeJSONC(data []byte) (map[string]any, error) {
	clean, err := stripJSONC(data)
	if err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(clean))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return nil, err
	}
	return m, nil
}

// stripJSONC removes comments and trailing commas outside strings. A removed comment
// becomes spaces (its newlines kept) so that decoder errors keep their offsets.
func stripJSONC(in []byte) ([]byte, error) {
	out := make([]byte, 0, len(in))
	for i := 0; i < len(in); i++ {
		c := in[i]
		switch {
		case c == '"':
			end, err := stringEnd(in, i)
			if err != nil {
				return nil, err
			}
			out = append(out, in[i:end]...)
			i = end - 1
		case c == '/' && i+1 < len(in) && in[i+1] == '/':
			for i < len(in) && in[i] != '\n' {
				out = append(out, ' ')
				i++
			}
			i--
		case c == '/' && i+1 < len(in) && in[i+1] == '*':
			end := bytes.Index(in[i+2:], []byte("*/"))
			if end < 0 {
				return nil, fmt.Errorf("offset %d: unterminated /* comment", i)
			}
			out = append(out, blank(in[i:i+2+end+2])...)
			i += 2 + end + 1
		case c == ']' || c == '}':
			dropTrailingComma(out)
			out = append(out, c)
		default:
			out = append(out, c)
		}
	}
	return out, nil
}

// stringEnd returns the offset just past the JSON string starting at in[start] ('"').
func stringEnd(in []byte, start int) (int, error) {
	for i := start + 1; i < len(in); i++ {
		switch in[i] {
		case '\\':
			i++
		case '"':
			return i + 1, nil
		case '\n':
			return 0, fmt.Errorf("offset %d: newline in string", i)
		}
	}
	return 0, fmt.Errorf("offset %d: unterminated string", start)
}

// dropTrailingComma blanks the last non-space byte of out if it is a comma.
func dropTrailingComma(out []byte) {
	for j := len(out) - 1; j >= 0; j-- {
		switch out[j] {
		case ' ', '\t', '\n', '\r':
			continue
		case ',':
			out[j] = ' '
		}
		return
	}
}

// blank replaces every byte but newlines with a space.
func blank(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		if c == '\n' {
			out[i] = c
		} else {
			out[i] = ' '
		}
	}
	return out
}
