package kvtransfer

import "pdsoak/kernels"

// aheadMinBytes is the room size from which a Send checksums its frames ahead, on a
// goroutine of its own, while the sending goroutine writes the batch before. Below it (the
// PD path's small rooms) the frames are checksummed inline: a goroutine per room would
// cost a wake-up for nothing to overlap.
const aheadMinBytes = 2 * flushBytes

// frameSource gives a Send its frames in order: Frame(i), or the same entries computed
// ahead. Why ahead: CRC32C of a big room reads its pages from memory the cache no longer
// holds, and done inline the socket sits idle meanwhile (the receiver waits); computed one
// batch ahead, the checksum of batch n+1 runs while batch n is written, and the pages are
// warm when the kernel copies them.
type frameSource struct {
	store     *kernels.KVStore
	src       []int32
	numTokens int

	entries []Entry  // ahead only: entries[i] is final once ready reports past i
	ready   int      // entries before this are final (the consumer's view)
	batches chan int // the producer's progress: entries before the value are final
	stop    chan struct{}
	done    chan struct{}
}

// newFrameSource starts checksumming ahead when the room is big enough to gain from it.
// The caller must call close before the pages go back to its caller.
func newFrameSource(store *kernels.KVStore, src []int32, numTokens int) *frameSource {
	fs := &frameSource{store: store, src: src, numTokens: numTokens}
	n := NumFrames(store.PageSize, store.Layers, numTokens)
	if n < 2 || numTokens*store.BytesPerToken*store.Layers < aheadMinBytes {
		return fs
	}
	fs.entries = make([]Entry, n)
	fs.batches = make(chan int, 1) // at most one finished batch waits: the lead stays warm
	fs.stop, fs.done = make(chan struct{}), make(chan struct{})
	go fs.produce()
	return fs
}

// produce checksums the frames in batches of about one writev's bytes.
func (fs *frameSource) produce() {
	defer close(fs.done)
	bytes := 0
	for i := range fs.entries {
		fs.entries[i], _ = Frame(fs.store, fs.src, fs.numTokens, i)
		bytes += int(fs.entries[i].Len)
		if last := i == len(fs.entries)-1; last || bytes >= flushBytes {
			bytes = 0
			select {
			case fs.batches <- i + 1:
			case <-fs.stop:
				return
			}
		}
		select {
		case <-fs.stop:
			return
		default:
		}
	}
}

// frame is frame i; frames are asked for in order.
func (fs *frameSource) frame(i int) (Entry, []byte) {
	if fs.entries == nil {
		return Frame(fs.store, fs.src, fs.numTokens, i)
	}
	for i >= fs.ready {
		fs.ready = <-fs.batches
	}
	j, layer := i/fs.store.Layers, i%fs.store.Layers
	e := fs.entries[i]
	return e, fs.store.LayerBytes(fs.src[j], layer)[:e.Len]
}

// close stops the producer and waits for it: after close no goroutine reads the pages.
func (fs *frameSource) close() {
	if fs.entries == nil {
		return
	}
	close(fs.stop)
	<-fs.done
}
