package worker

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"strconv"
)

// A journal record is one line: a frame header, the report's JSON and a
// newline. The header is '#', the JSON's length and its CRC-32 (IEEE), each
// as 8 hex digits, and a space after each:
//
//	#0000001a 5c1f9e2b {"id":"r1","task_id":"t"}\n
//
// The frame lets a reader tell a whole record from a torn one (a write cut
// short by a full disk or a crash): a torn record's length or checksum does
// not match, and it is cut off at start instead of being glued to the next.
// It stays one text line, so the journal can still be read with a pager.
const (
	frameMark      = '#'
	frameHeaderLen = 1 + 8 + 1 + 8 + 1
)

// frameRecord returns the journal record of a report's JSON.
func frameRecord(payload []byte) []byte {
	rec := make([]byte, 0, frameHeaderLen+len(payload)+1)
	rec = fmt.Appendf(rec, "%c%08x %08x ", frameMark, len(payload), crc32.ChecksumIEEE(payload))
	rec = append(rec, payload...)
	return append(rec, '\n')
}

// recordPayload returns the report JSON of one journal line (with its
// newline); ok is false for a torn or corrupt line. A line without a frame is
// read when it is valid JSON: the previous release wrote bare JSON lines, and
// a worker upgraded with undelivered reports in its journal must still
// deliver them (a torn bare line is not valid JSON, so it is refused too).
func recordPayload(line []byte) (payload []byte, ok bool) {
	if len(line) == 0 || line[len(line)-1] != '\n' {
		return nil, false // no newline: the write was cut short
	}
	line = line[:len(line)-1]
	if len(line) == 0 || line[0] != frameMark {
		return line, len(line) > 0 && line[0] == '{' && json.Valid(line)
	}
	if len(line) < frameHeaderLen || line[9] != ' ' || line[18] != ' ' {
		return nil, false
	}
	n, err1 := strconv.ParseUint(string(line[1:9]), 16, 32)
	sum, err2 := strconv.ParseUint(string(line[10:18]), 16, 32)
	payload = line[frameHeaderLen:]
	if err1 != nil || err2 != nil || uint64(len(payload)) != n || crc32.ChecksumIEEE(payload) != uint32(sum) {
		return nil, false
	}
	return payload, true
}

// scanJournal reads the journal r of size bytes and returns where its last
// whole record ends: what follows is a torn tail. A corrupt line between
// whole records is left in place (the reader skips it with a log line).
func scanJournal(r io.ReaderAt, size int64) (good int64, records int, err error) {
	br := bufio.NewReaderSize(io.NewSectionReader(r, 0, size), 64<<10)
	var off int64
	for {
		line, n, tooLong, rerr := readJournalLine(br)
		off += n
		if !tooLong {
			if _, ok := recordPayload(line); ok {
				good = off
				records++
			}
		}
		if rerr != nil {
			if errors.Is(rerr, io.EOF) {
				return good, records, nil
			}
			return good, records, rerr
		}
	}
}

// journalFile is what the reporter needs of its journal's append handle: an
// *os.File, or in tests a wrapper that fails writes on demand.
type journalFile interface {
	io.Writer
	io.ReaderAt
	Truncate(size int64) error
	Sync() error
	Close() error
	Stat() (os.FileInfo, error)
}
