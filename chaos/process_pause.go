package chaos

import "pdsoak/scenarios"

// process_pause freezes processes with SIGSTOP (verified: state T in /proc/<pid>/stat and,
// when the process's URL is known, a GET of it unanswered within ServerProbeTimeout) and
// thaws them with SIGCONT on revert. A frozen worker accepts TCP connections (the kernel
// does) but answers nothing: exactly the silent hang the harness must turn into errors.
func init() {
	Register(Type{
		Name:    "process_pause",
		Doc:     "freeze processes with SIGSTOP; SIGCONT on revert",
		Targets: scenarios.TargetProcess,
		New: func(spec scenarios.Fault) (Fault, error) {
			b, p := newBase(spec)
			if err := p.done(); err != nil {
				return nil, err
			}
			return &pauseFault{base: b}, nil
		},
	})
}
