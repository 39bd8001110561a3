package chaos

import "pdsoak/scenarios"

// process_restart restarts processes (verified: a new live pid). Nothing to revert.
func init() {
	Register(Type{
		Name:    "process_restart",
		Doc:     "restart processes (kill and start again); verified by a new pid",
		Targets: scenarios.TargetProcess,
		New: func(spec scenarios.Fault) (Fault, error) {
			b, p := newBase(spec)
			if err := p.done(); err != nil {
				return nil, err
			}
			return &restartFault{base: b}, nil
		},
	})
}
