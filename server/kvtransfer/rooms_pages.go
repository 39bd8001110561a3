package kvtransfer

import (
	"sync/atomic"

	"pdsoak/kernels"
)

// Pages is the receiver's rule for one PAGES message of room on ep, whose table is es:
// every frame is checked (CheckFrame) and the destination of its payload in store is
// appended to dst, for the driver to read the payloads into (the Receiver straight from
// the socket, the simulator by copy) and then VerifyPages. r is nil when the room is gone:
// the driver reads the payloads and drops them. bad is a frame that fails the room: the
// driver Ends r with it (and FAIL) and drops the payloads. dst is returned unchanged
// unless r is live and bad nil.
func (m *RecvRooms) Pages(ep *Endpoint, room uint64, es []Entry, store *kernels.KVStore, dst [][]byte) (r *RecvRoom, out [][]byte, bad error) {
	if r = ep.rooms[room]; r == nil {
		return nil, dst, nil
	}
	for _, e := range es {
		if bad = m.CheckFrame(r, e); bad != nil {
			return r, dst, bad
		}
	}
	for _, e := range es {
		dst = append(dst, store.LayerBytes(r.Dest[e.Page], int(e.Layer))[:e.Len])
	}
	return r, dst, nil
}

// VerifyPages checks the payloads of room's frames es, read into dst, against their
// CRC32C: the first that does not match is err (ChecksumError: the room fails); n is
// the payload bytes verified, for Progress. It stops early, with neither, once gone is
// set (nil: never; the Receiver's pageGuard). It reads only dst, so the Receiver calls it
// without its lock.
func VerifyPages(room uint64, es []Entry, dst [][]byte, gone *atomic.Bool) (n int64, err error) {
	for i, e := range es {
		if gone != nil && gone.Load() {
			return n, nil
		}
		if got := Checksum(dst[i]); got != e.CRC {
			return n, ChecksumError(room, e, got)
		}
		n += int64(e.Len)
	}
	return n, nil
}

// NumFrames is how many frames carry a room of numTokens tokens: one per page and layer.
func NumFrames(pageSize, layers, numTokens int) int {
	return (numTokens + pageSize - 1) / pageSize * layers
}

// Frame is frame i of a room of numTokens tokens sent from the pages src of store (page
// i/layers, layer i%layers, in the order the Sender sends them) and its payload, which
// stays in store.
func Frame(store *kernels.KVStore, src []int32, numTokens, i int) (Entry, []byte) {
	j, layer := i/store.Layers, i%store.Layers
	n := FrameLen(store.PageSize, store.BytesPerToken, numTokens, j)
	payload := store.LayerBytes(src[j], layer)[:n]
	return Entry{Page: uint32(j), Layer: uint32(layer), Len: uint32(n), CRC: Checksum(payload)}, payload
}
