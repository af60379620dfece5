package mcpserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// lockedWriter serializes whole writes: the SDK writes each message with
// one Write, and so does the stdio filter; lines never interleave.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// filterStdio passes on the lines of in that are JSON-RPC messages (or
// batches of them) and answers any other line itself, as JSON-RPC asks:
// -32700 (parse error) for a line that is not JSON or is longer than max,
// -32600 (invalid request) for JSON that is no message, with the id when it
// can be read. Given such a line the SDK ends the session, and a host (or
// a person typing into toold -stdio) would get no answer at all. Blank
// lines are skipped. The returned reader ends when in does; closing it
// stops the filter at its next line.
func filterStdio(in io.Reader, out io.Writer, max int) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		r := bufio.NewReaderSize(in, 64<<10)
		for {
			line, long, err := readLine(r, max)
			var werr error
			switch {
			case long:
				werr = answer(out, nil, jsonrpc.CodeParseError, "Parse error: the line is longer than "+strconv.Itoa(max)+" bytes")
			case len(bytes.TrimSpace(line)) == 0:
			case !json.Valid(line):
				werr = answer(out, nil, jsonrpc.CodeParseError, "Parse error: the line is not JSON; send one JSON-RPC message per line")
			case !isMessage(line):
				werr = answer(out, lineID(line), jsonrpc.CodeInvalidRequest, "Invalid Request: the line is JSON but not a JSON-RPC 2.0 message")
			default:
				_, werr = pw.Write(append(bytes.TrimRight(line, "\r\n"), '\n'))
			}
			if werr != nil {
				pw.CloseWithError(werr)
				return
			}
			if err != nil {
				pw.CloseWithError(err) // io.EOF ends the session as the end of stdin did
				return
			}
		}
	}()
	return pr
}

// readLine reads one line (its newline included) of at most max bytes;
// a longer one is read to its end and dropped, and long is true.
func readLine(r *bufio.Reader, max int) (line []byte, long bool, err error) {
	for {
		chunk, err := r.ReadSlice('\n')
		if !long {
			if len(line)+len(chunk) > max {
				long, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, long, err
		}
	}
}

// isMessage reports whether the SDK can decode line: one message, or a
// non-empty array of them.
func isMessage(line []byte) bool {
	var batch []json.RawMessage
	if json.Unmarshal(line, &batch) == nil {
		for _, m := range batch {
			if _, err := jsonrpc.DecodeMessage(m); err != nil {
				return false
			}
		}
		return len(batch) > 0
	}
	_, err := jsonrpc.DecodeMessage(line)
	return err == nil
}

// lineID is the id of a line that is an object with a string or number
// id, else nil (JSON-RPC answers null then).
func lineID(line []byte) json.RawMessage {
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(line, &m) != nil || len(m.ID) == 0 || (m.ID[0] != '"' && m.ID[0] != '-' && (m.ID[0] < '0' || m.ID[0] > '9')) {
		return nil
	}
	return m.ID
}

func answer(out io.Writer, id json.RawMessage, code int64, msg string) error {
	if id == nil {
		id = json.RawMessage("null")
	}
	b, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   jsonrpc.Error   `json:"error"`
	}{"2.0", id, jsonrpc.Error{Code: code, Message: msg}})
	if err != nil {
		return err
	}
	_, err = out.Write(append(b, '\n'))
	return err
}
