package channels

import (
	"encoding/json"
	"unicode/utf8"
)

// message is one published message: its text and its JSON string form, encoded once
// per publish and shared by the queue of every subscriber it reached, so a stream line
// copies bytes instead of encoding the message again per subscriber.
type message struct {
	text string
	json []byte
}

func newMessage(text string) *message {
	return &message{text: text, json: appendJSONString(make([]byte, 0, len(text)+2), text)}
}

// appendJSONString appends s as a JSON string, as json.Marshal writes it (HTML characters
// and U+2028/U+2029 escaped): a copy when nothing needs escaping, json.Marshal otherwise.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' || c >= utf8.RuneSelf {
			b, _ := json.Marshal(s)
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}
