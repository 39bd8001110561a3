package chaos

import "pdsoak/scenarios"

// client_disconnect makes the harness's client cancel streams after k tokens (I6: aborts
// propagate). Those requests end as "cancelled", which is not a drop; the leak check
// after drain shows whether decode and prefill freed their resources.
func init() {
	Register(Type{
		Name:    "client_disconnect",
		Doc:     "client cancels streams mid-way after k tokens",
		Targets: scenarios.TargetWorkload,
		Params: []string{"after_tokens=4", "fraction=1: share of streams cancelled",
			"requests=0: extra streams the Env sends to cancel (0: the workload's own)"},
		New: func(spec scenarios.Fault) (Fault, error) {
			b, p := newBase(spec)
			d := Disconnect{
				AfterTokens: p.Int("after_tokens", 4, 0, 1<<20),
				Fraction:    p.Float("fraction", 1, 0, 1),
				Requests:    p.Int("requests", 0, 0, 100000),
			}
			if err := p.done(); err != nil {
				return nil, err
			}
			if d.Fraction == 0 && d.Requests == 0 {
				return nil, errNothingToCancel
			}
			return &disconnectFault{base: b, d: d}, nil
		},
	})
}
