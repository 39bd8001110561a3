package netproxy

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/Shopify/toxiproxy/v2/toxics"
)

// counterType is a pass-through toxic registered with toxiproxy that counts bytes live.
// Toxiproxy builds toxics by reflection from JSON, so a toxic cannot hold a pointer given
// by the caller; it finds its counter by id in a process-wide map instead.
const counterType = "pdsoak_counter"

type counter struct {
	id    int64
	bytes atomic.Int64
	conns atomic.Int64
	// dropped counts bytes an interrupted counter could not pass on (see Pipe).
	dropped atomic.Int64
}

var (
	counters   sync.Map // id → *counter
	counterSeq atomic.Int64
)

func newCounter() *counter {
	c := &counter{id: counterSeq.Add(1)}
	counters.Store(c.id, c)
	return c
}

// counterToxic passes chunks through unchanged, adding their size to counter ID.
type counterToxic struct {
	ID int64 `json:"id"`
}

func (t *counterToxic) lookup() *counter {
	v, ok := counters.Load(t.ID)
	if !ok {
		return nil
	}
	return v.(*counter)
}

// NewState is called once per connection and direction when a link starts; it counts
// connections.
func (t *counterToxic) NewState() any {
	if c := t.lookup(); c != nil {
		c.conns.Add(1)
	}
	return nil
}

func (t *counterToxic) Pipe(stub *toxics.ToxicStub) {
	c := t.lookup()
	for {
		select {
		case <-stub.Interrupt:
			return
		case chunk := <-stub.Input:
			if chunk == nil {
				stub.Close()
				return
			}
			if c != nil {
				c.bytes.Add(int64(len(chunk.Data)))
			}
			// A plain send would hold an interrupt (adding or removing another toxic)
			// for as long as nobody reads the output — for good when the connection is
			// closing (Shopify/toxiproxy#558). Like toxiproxy's bandwidth toxic, an
			// interrupted counter flushes its chunk within a bound and then lets go.
			select {
			case stub.Output <- chunk:
			case <-stub.Interrupt:
				if err := stub.WriteOutput(chunk, interruptFlush); err != nil && c != nil {
					c.dropped.Add(int64(len(chunk.Data)))
				}
				return
			}
		}
	}
}

// interruptFlush is how long an interrupted counter waits to pass on the chunk it holds
// (toxiproxy's own toxics wait 5 s).
const interruptFlush = 5 * time.Second

func init() {
	toxics.Register(counterType, new(counterToxic))
}
