package transfer

import (
	"net"
	"sync"
)

// batchSize is how many bytes of TLS records a bulk answer gathers
// before it writes them: 16 full records (16 KiB of data, 22 bytes of
// framing and tag each) in one write(2) instead of sixteen.
const batchSize = 16 * (16<<10 + 22)

var batchPool = sync.Pool{New: func() any { b := make([]byte, 0, batchSize); return &b }}

// batchConn sits under the server's TLS connection on the bulk path.
// crypto/tls writes every record of at most 16 KiB with its own write;
// between begin and flush, batchConn gathers them and writes batchSize
// bytes at a time, so an answer of 1 MiB takes 5 writes instead of 66
// and leaves in full segments. Outside begin..flush (the handshake, the
// magic, a close alert) writes go straight through. flush always writes
// what was gathered: nothing is held back after it returns. begin and
// flush are called by the goroutine serving the connection, Write by
// crypto/tls under its write lock; nothing else writes between begin and
// flush (the only close from another goroutine, the stall of fault
// injection, comes before begin).
type batchConn struct {
	net.Conn
	off bool    // never gather (the benchmark's plain side)
	bp  *[]byte // from batchPool while batching, else nil
}

// begin starts gathering writes.
func (b *batchConn) begin() {
	if b.bp == nil && !b.off {
		b.bp = batchPool.Get().(*[]byte)
	}
}

// flush writes what was gathered and stops gathering.
func (b *batchConn) flush() error {
	if b.bp == nil {
		return nil
	}
	bp := b.bp
	b.bp = nil
	var err error
	if len(*bp) > 0 {
		_, err = b.Conn.Write(*bp)
	}
	*bp = (*bp)[:0]
	batchPool.Put(bp)
	return err
}

func (b *batchConn) Write(p []byte) (int, error) {
	if b.bp == nil {
		return b.Conn.Write(p)
	}
	buf := *b.bp
	if len(buf)+len(p) > cap(buf) && len(buf) > 0 {
		if _, err := b.Conn.Write(buf); err != nil {
			*b.bp = buf[:0]
			return 0, err
		}
		buf = buf[:0]
	}
	if len(p) > cap(buf) {
		*b.bp = buf
		return b.Conn.Write(p)
	}
	*b.bp = append(buf, p...)
	return len(p), nil
}
