package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
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

// DecodeRunsRequest reads a RunsRequest ({"runs": [...]}) from r as
// DecodeStrict would, but one token and one run at a time, reading at most
// MaxRunsBatchBytes bytes: a body that is longer or holds more than
// MaxRunsPerBatch runs fails with ErrBatchTooLarge as soon as it is seen, so
// a huge body is never held whole. Unknown fields, a second "runs" and data
// after the object are refused like DecodeStrict refuses them.
func DecodeRunsRequest(r io.Reader) ([]RunReport, error) {
	lr := &batchLimitReader{r: r, left: MaxRunsBatchBytes}
	dec := json.NewDecoder(lr)
	dec.DisallowUnknownFields()
	fail := func(err error) ([]RunReport, error) {
		if lr.over {
			return nil, fmt.Errorf("%w: more than %d bytes", ErrBatchTooLarge, MaxRunsBatchBytes)
		}
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	tok, err := dec.Token()
	if errors.Is(err, io.EOF) && !lr.over {
		return nil, errors.New("empty body")
	}
	if err != nil {
		return fail(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("the body must be a JSON object, not %v", tok)
	}
	runs := []RunReport{}
	seen := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fail(err)
		}
		key, _ := tok.(string)
		// encoding/json matches field names case-insensitively.
		if !strings.EqualFold(key, "runs") {
			return nil, fmt.Errorf("json: unknown field %q", key)
		}
		if seen {
			return nil, errors.New(`"runs" given twice`)
		}
		seen = true
		if tok, err = dec.Token(); err != nil {
			return fail(err)
		}
		if tok == nil { // "runs": null, as Unmarshal reads it: no runs
			continue
		}
		if d, ok := tok.(json.Delim); !ok || d != '[' {
			return nil, fmt.Errorf(`"runs" must be an array, not %v`, tok)
		}
		for dec.More() {
			if len(runs) == MaxRunsPerBatch {
				return nil, fmt.Errorf("%w: more than %d runs", ErrBatchTooLarge, MaxRunsPerBatch)
			}
			var rep RunReport
			if err := dec.Decode(&rep); err != nil {
				return fail(err)
			}
			runs = append(runs, rep)
		}
		if _, err := dec.Token(); err != nil { // ']'
			return fail(err)
		}
	}
	if _, err := dec.Token(); err != nil { // '}'
		return fail(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		if lr.over {
			return fail(err)
		}
		return nil, errors.New("trailing data after the JSON value")
	}
	return runs, nil
}

// batchLimitReader reads at most left bytes of r; past them it fails and
// records that the body was too long.
type batchLimitReader struct {
	r    io.Reader
	left int64
	over bool
}

func (l *batchLimitReader) Read(p []byte) (int, error) {
	if l.left <= 0 {
		// One byte more tells a body of exactly the limit from a longer one.
		var one [1]byte
		n, err := l.r.Read(one[:])
		if n > 0 {
			l.over = true
			return 0, ErrBatchTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}
