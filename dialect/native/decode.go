package native

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"

	"voicesvc/control"
	"voicesvc/synth"
)

// fieldCodes maps a JSON field (dotted path as encoding/json reports it,
// e.g. "settings.speed") to the 400 code a wrong type in it answers. A
// field is matched exactly, then by its first segment; anything else is
// invalid_request.
type fieldCodes map[string]string

func (f fieldCodes) code(field string) string {
	if c, ok := f[field]; ok {
		return c
	}
	if i := strings.IndexByte(field, '.'); i > 0 {
		if c, ok := f[field[:i]]; ok {
			return c
		}
	}
	return control.EInvalidRequest
}

// decodeBody reads a JSON request body into dst, a pointer to a struct.
// The rules of docs/api.md: unknown fields are ignored; malformed JSON is
// 400 invalid_json; a value of the wrong type (a string where a number is
// required) is 400 with the code codes gives its field; a body that is not
// one JSON object is 400 invalid_request. An empty body decodes as {}.
// The server bounded the body before the handler ran.
func decodeBody(body []byte, dst any, codes fieldCodes) error {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil
	}
	if body[0] != '{' {
		if !json.Valid(body) {
			return control.Errorf(control.EInvalidJSON, "request body is not valid JSON")
		}
		return control.Errorf(control.EInvalidRequest, "request body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(dst); err != nil {
		return jsonError(err, codes)
	}
	if _, err := dec.Token(); err != io.EOF {
		return control.Errorf(control.EInvalidJSON, "unexpected data after the JSON object")
	}
	return nil
}

// jsonError turns an encoding/json error into the 400 the field calls for.
func jsonError(err error, codes fieldCodes) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			return control.Errorf(control.EInvalidRequest, "request body must be a JSON object")
		}
		return control.Errorf(codes.code(field), "%s: expected %s, got %s", field, synth.KindName(te.Type), te.Value)
	}
	var ce *control.Error
	if errors.As(err, &ce) {
		return ce
	}
	return control.Errorf(control.EInvalidJSON, "request body is not valid JSON")
}
