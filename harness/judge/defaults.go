package judge

import (
	"errors"
	"time"
)

// ErrInfrastructure marks a run that could not be judged: the target could not be
// started or reached, a fault could not be applied, or the harness itself was the
// bottleneck. The CLI maps it to exit code 3. The runner (harness.ErrInfrastructure)
// and the simulator wrap this one sentinel.
var ErrInfrastructure = errors.New("harness: infrastructure failure")

// The run's timings that a real run and a simulated one share (harness.Options and
// sim.Options take them as defaults).
const (
	// DefaultSampleInterval is how often server gauges and GPUs are sampled into the ledger.
	DefaultSampleInterval = 2 * time.Second
	// DefaultLeakPollInterval is how often gauges are scraped while waiting for them to drain.
	DefaultLeakPollInterval = 250 * time.Millisecond
	// DefaultCancelDrain is how long in-flight requests may keep running after Ctrl-C.
	DefaultCancelDrain = 2 * time.Second
	// DefaultResolveAfterCancel bounds the wait for cancelled requests to return.
	DefaultResolveAfterCancel = 10 * time.Second
)
