package client

import (
	"bufio"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Content codings. The client asks for identity (Accept-Encoding: identity); a server
// that encodes anyway (RFC 9110 §12.5.3 allows any coding when the request names none,
// and gateways in front of vLLM do) is decoded, incrementally for a stream, so
// compressed bytes are never misread as an invalid body.
var (
	// errCoding is a body the named coding cannot decode: invalid.
	errCoding = errors.New("client: undecodable content coding")
	// errCodingShort is a compressed body whose bytes ended cleanly before the coded
	// stream did: a clean but incomplete end, truncated.
	errCodingShort = errors.New("client: compressed body ended early")
)

// newDecoder returns a reader that undoes coding ce over src (gzip, x-gzip, deflate).
func newDecoder(ce string, src io.Reader) (io.Reader, error) {
	d := &decoder{src: recorder{r: src}}
	switch strings.ToLower(strings.TrimSpace(ce)) {
	case "gzip", "x-gzip":
		d.open = func(r io.Reader) (io.Reader, error) { return gzip.NewReader(r) }
	case "deflate":
		// "deflate" is zlib (RFC 1950); some servers send raw deflate (RFC 1951).
		d.open = func(r io.Reader) (io.Reader, error) {
			br := bufio.NewReaderSize(r, 512)
			if b, err := br.Peek(2); err == nil && b[0]&0x0f == 8 && (uint16(b[0])<<8|uint16(b[1]))%31 == 0 {
				return zlib.NewReader(br)
			}
			return flate.NewReader(br), nil
		}
	default:
		return nil, fmt.Errorf("%w: %q is not supported (the request asked for identity)", errCoding, trim(ce))
	}
	return d, nil
}

// recorder remembers the last error of the wire below a decoder, so a decoder's error
// can be told apart from the connection's.
type recorder struct {
	r   io.Reader
	err error
}

func (r *recorder) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil {
		r.err = err
	}
	return n, err
}

// decoder opens its coding at the first read (a gzip header read at the head would
// block before the stream's deadlines are armed).
type decoder struct {
	src  recorder
	open func(io.Reader) (io.Reader, error)
	r    io.Reader
}

func (d *decoder) Read(p []byte) (int, error) {
	if d.r == nil {
		r, err := d.open(&d.src)
		if err != nil {
			return 0, d.wrap(err)
		}
		d.r = r
	}
	n, err := d.r.Read(p)
	if err != nil && err != io.EOF {
		err = d.wrap(err)
	}
	return n, err
}

// wrap says whose error err is: the wire's (passed on), a clean end inside the coded
// stream (errCodingShort), or the coding's (errCoding).
func (d *decoder) wrap(err error) error {
	switch {
	case d.src.err != nil && d.src.err != io.EOF:
		return d.src.err
	case d.src.err == io.EOF && (err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF)):
		return errCodingShort
	}
	return fmt.Errorf("%w: %w", errCoding, err)
}
