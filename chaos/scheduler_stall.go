package chaos

import "pdsoak/server/failpoint"

// scheduler_stall holds a worker's driver loop before each scheduler step (failpoint
// engine/step): queues keep filling while nothing progresses. /health must fail (I7) and
// stage timeouts must still answer clients.
func init() {
	Register(newFailpointType("scheduler_stall",
		"stall a worker's scheduler loop (failpoint engine/step: pause or sleep)",
		failpoint.EngineStep, nil,
		[]string{"mode=pause: pause (hold until reverted) or sleep", "delay=5s: sleep per step (mode sleep)"},
		stallTerms))
}
