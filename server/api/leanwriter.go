package api

import (
	"bufio"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// leanWriter is the http.ResponseWriter of a request the lean server answers. It writes
// what net/http's response writer writes for the same handler calls, byte for byte but
// the Date (TestLeanWritesWhatNetHTTPWrites): the handler's headers sorted, then Date,
// then Content-Length (a handler done within bufferBeforeChunking bytes, unflushed), a
// sniffed Content-Type, Connection: close, Transfer-Encoding: chunked; the body through
// a 2 KiB buffer into chunks, and the connection's 4 KiB buffer; Flush writes both.
// ResponseController finds FlushError and SetWriteDeadline on it.
type leanWriter struct {
	c           *leanConn
	hdr         http.Header
	status      int
	wroteHeader bool // the status is decided
	headSent    bool // the head is in the connection's buffer
	chunking    bool
	wantsClose  bool // the request said Connection: close
	closeAfter  bool
	handlerDone bool
	length      int64       // a valid Content-Length the handler set; -1 none
	clone       http.Header // the header at WriteHeader when it holds a framing field
	haveType    bool        // Content-Type set (or a Content-Encoding: no sniffing)
	haveDate    bool
	deadline    bool // the handler set a write deadline
	body        *bufio.Writer
	err         error // the first write error (sticky)
}

// bufferBeforeChunking is net/http's: a handler that ends within it, unflushed, gets a
// Content-Length instead of a chunked body.
const bufferBeforeChunking = 2048

// framing reports whether hdr holds a field net/http's writer treats specially.
func framing(hdr http.Header) bool {
	for _, k := range [...]string{"Content-Length", "Transfer-Encoding", "Connection", "Trailer"} {
		if _, ok := hdr[k]; ok {
			return true
		}
	}
	for k := range hdr {
		if len(k) > len(http.TrailerPrefix) && k[:len(http.TrailerPrefix)] == http.TrailerPrefix {
			return true
		}
	}
	return false
}

func (w *leanWriter) Header() http.Header { return w.hdr }

func (w *leanWriter) WriteHeader(code int) {
	if w.wroteHeader || code < 200 { // 1xx interim answers: the /generate handler sends none
		return
	}
	if code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	w.wroteHeader, w.status = true, code
	_, w.haveType = w.hdr["Content-Type"]
	_, w.haveDate = w.hdr["Date"]
	if w.hdr.Get("Content-Encoding") != "" {
		w.haveType = true
	}
	if !framing(w.hdr) {
		// The head's fields, as they are now (net/http snapshots them here too).
		w.c.hdrBuf.Reset()
		_ = w.hdr.Write(&w.c.hdrBuf)
		return
	}
	w.clone = w.hdr.Clone()
	if cl := w.hdr.Get("Content-Length"); cl != "" {
		if v, err := strconv.ParseInt(cl, 10, 64); err == nil && v >= 0 {
			w.length = v
		}
	}
}

func (w *leanWriter) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if len(p) == 0 {
		return 0, nil
	}
	if !bodyAllowed(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	return w.body.Write(p)
}

// FlushError writes what is buffered, head included, to the connection.
func (w *leanWriter) FlushError() error {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if err := w.body.Flush(); err != nil {
		return err
	}
	if !w.headSent {
		w.writeHead(nil)
	}
	if err := w.c.bw.Flush(); err != nil && w.err == nil {
		w.err = err
	}
	return w.err
}

func (w *leanWriter) Flush() { _ = w.FlushError() }

// SetWriteDeadline bounds the connection's writes (the handler's write guard).
func (w *leanWriter) SetWriteDeadline(t time.Time) error {
	w.deadline = true
	return w.c.nc.SetWriteDeadline(t)
}

// chunks is the writer under the 2 KiB body buffer: net/http's chunkWriter.
type chunks struct{ w *leanWriter }

func (c chunks) Write(p []byte) (int, error) {
	w := c.w
	if !w.headSent {
		w.writeHead(p)
	}
	if w.err != nil {
		return 0, w.err
	}
	bw := w.c.bw
	if w.chunking {
		var hex [16]byte
		_, _ = bw.Write(strconv.AppendInt(hex[:0], int64(len(p)), 16))
		_, _ = bw.WriteString("\r\n")
	}
	_, _ = bw.Write(p)
	if w.chunking {
		_, _ = bw.WriteString("\r\n")
	}
	if err := w.c.werr; err != nil && w.err == nil {
		w.err = err
	}
	if w.err != nil {
		return 0, w.err
	}
	return len(p), nil
}

// writeHead puts the status line and the fields in the connection's buffer, deciding
// the framing as net/http's chunkWriter.writeHeader does for an HTTP/1.1 request; p is
// the body's first bytes (all of it when the handler is done).
func (w *leanWriter) writeHead(p []byte) {
	w.headSent = true
	bw, code := w.c.bw, w.status
	hdr := w.clone
	te, conn := "", ""
	if hdr != nil {
		te, conn = hdr.Get("Transfer-Encoding"), hdr.Get("Connection")
	}
	var length []byte
	if w.handlerDone && te == "" && bodyAllowed(code) && w.length < 0 && hdr.Get("Content-Length") == "" {
		w.length = int64(len(p))
		length = strconv.AppendInt(nil, int64(len(p)), 10)
	}
	if w.wantsClose || conn == "close" || w.c.s.closing.Load() {
		w.closeAfter = true
	}
	ctype := ""
	if bodyAllowed(code) && !w.haveType && te == "" && len(p) > 0 {
		ctype = http.DetectContentType(p)
	}
	bodyless := !bodyAllowed(code) || code == http.StatusNoContent
	switch {
	case bodyless, w.length >= 0:
	case te == "identity":
		w.closeAfter = true
	default:
		w.chunking = true
	}
	var exclude map[string]bool
	if hdr != nil {
		exclude = map[string]bool{"Transfer-Encoding": true, "Trailer": true}
		if w.chunking || bodyless {
			exclude["Content-Length"] = true
		}
		if w.closeAfter {
			exclude["Connection"] = true
		}
		for k := range hdr {
			if len(k) > len(http.TrailerPrefix) && k[:len(http.TrailerPrefix)] == http.TrailerPrefix {
				exclude[k] = true
			}
		}
	}
	_, _ = bw.WriteString("HTTP/1.1 ")
	if text := http.StatusText(code); text != "" {
		_, _ = bw.WriteString(strconv.Itoa(code))
		_ = bw.WriteByte(' ')
		_, _ = bw.WriteString(text)
		_, _ = bw.WriteString("\r\n")
	} else {
		fmt.Fprintf(bw, "%03d status code %d\r\n", code, code)
	}
	if hdr != nil {
		_ = hdr.WriteSubset(bw, exclude)
	} else {
		_, _ = bw.Write(w.c.hdrBuf.Bytes())
	}
	if !w.haveDate {
		_, _ = bw.WriteString("Date: ")
		_, _ = bw.Write(w.c.s.date())
		_, _ = bw.WriteString("\r\n")
	}
	if length != nil {
		_, _ = bw.WriteString("Content-Length: ")
		_, _ = bw.Write(length)
		_, _ = bw.WriteString("\r\n")
	}
	if ctype != "" {
		_, _ = bw.WriteString("Content-Type: " + ctype + "\r\n")
	}
	if w.closeAfter {
		_, _ = bw.WriteString("Connection: close\r\n")
	}
	if w.chunking {
		_, _ = bw.WriteString("Transfer-Encoding: chunked\r\n")
	}
	_, _ = bw.WriteString("\r\n")
}

// finish ends the response after the handler returned: the rest of the body, the
// chunked terminator, one flush (net/http's finishRequest).
func (w *leanWriter) finish() error {
	w.handlerDone = true
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if err := w.body.Flush(); err != nil && w.err == nil {
		w.err = err
	}
	if !w.headSent {
		w.writeHead(nil)
	}
	if w.chunking {
		_, _ = w.c.bw.WriteString("0\r\n\r\n")
	}
	if err := w.c.bw.Flush(); err != nil && w.err == nil {
		w.err = err
	}
	if w.err == nil && w.c.werr != nil {
		w.err = w.c.werr
	}
	return w.err
}

func bodyAllowed(code int) bool {
	return !(code >= 100 && code <= 199) && code != http.StatusNoContent && code != http.StatusNotModified
}

// connWriter is what the connection's 4 KiB buffer writes to: it keeps the first error
// (net/http's checkConnErrorWriter), so a later write on a broken connection fails.
type connWriter struct{ c *leanConn }

func (cw connWriter) Write(p []byte) (int, error) {
	n, err := cw.c.nc.Write(p)
	if err != nil && cw.c.werr == nil {
		cw.c.werr = err
	}
	return n, err
}

// dateCache is the Date value of the current second (formatting it per response shows
// in a profile).
type dateCache struct {
	sec int64
	b   []byte
}

func (s *leanServer) date() []byte {
	now := time.Now()
	if d := s.dates.Load(); d != nil && d.sec == now.Unix() {
		return d.b
	}
	d := &dateCache{sec: now.Unix(), b: now.UTC().AppendFormat(nil, http.TimeFormat)}
	s.dates.Store(d)
	return d.b
}
