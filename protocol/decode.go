package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// DecodeStrict decodes exactly one JSON value from body into v: an empty
// body, unknown fields and data after the value are refused. Every body of
// the protocol is read this way, on both sides.
func DecodeStrict(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return errors.New("empty body")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}
