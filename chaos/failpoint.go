package chaos

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"pdsoak/scenarios"
	"pdsoak/server/failpoint"
)

// failpointFault enables a failpoint on every member process and proves it by hit counts
// read back over the admin API.
type failpointFault struct {
	*base
	point string
	terms string
	roles []string

	applied map[string]Failpoints
	order   []string
}

func init() {
	Register(Type{
		Name:    "failpoint",
		Doc:     "enable any failpoint with gofail terms on the target processes",
		Targets: scenarios.TargetProcess,
		Params:  []string{"name: failpoint name (e.g. engine/admit)", "terms: gofail terms (e.g. 50%return(reject))"},
		New: func(spec scenarios.Fault) (Fault, error) {
			b, p := newBase(spec)
			name := p.String("name", "")
			terms := p.String("terms", "")
			if err := p.done(); err != nil {
				return nil, err
			}
			if !failpoint.ValidName(name) {
				return nil, fmt.Errorf("params.name: must name a failpoint (e.g. %s), got %q", failpoint.EngineAdmit, name)
			}
			chain, err := failpoint.ParseTerms(terms)
			if err != nil {
				return nil, fmt.Errorf("params.terms: %w", err)
			}
			if len(chain) == 0 {
				return nil, fmt.Errorf("params.terms: empty")
			}
			return &failpointFault{base: b, point: name, terms: terms}, nil
		},
	})
}

// stallTerms reads mode (pause|sleep) and delay and returns the terms of a stall.
func stallTerms(p *params) string {
	mode := p.String("mode", "pause", "pause", "sleep")
	delay := p.Duration("delay", 5*time.Second)
	if delay > failpoint.MaxSleep {
		p.fail("delay", "must be ≤ %s", failpoint.MaxSleep)
	}
	if mode == "pause" {
		return "pause"
	}
	return "sleep(" + delay.String() + ")"
}

// newFailpointType registers a catalogue type over one failpoint. terms builds the terms
// from the params; roles restricts the target processes (none: any).
func newFailpointType(name, doc, point string, roles []string, paramDocs []string, terms func(p *params) string) Type {
	return Type{
		Name: name, Doc: doc, Targets: scenarios.TargetProcess, Params: paramDocs,
		New: func(spec scenarios.Fault) (Fault, error) {
			b, p := newBase(spec)
			t := terms(p)
			if err := p.done(); err != nil {
				return nil, err
			}
			if _, err := failpoint.ParseTerms(t); err != nil {
				return nil, fmt.Errorf("params: %w", err)
			}
			return &failpointFault{base: b, point: point, terms: t, roles: roles}, nil
		},
	}
}

// fireTerms reads count (0: every time) and probability (percent) and prefixes action.
func fireTerms(p *params, action string) string {
	count := p.Int("count", 0, 0, 1<<30)
	prob := p.Float("probability", 100, 0, 100)
	var b strings.Builder
	if prob < 100 {
		b.WriteString(strconv.FormatFloat(prob, 'f', -1, 64))
		b.WriteByte('%')
	}
	if count > 0 {
		b.WriteString(strconv.Itoa(count))
		b.WriteByte('*')
	}
	b.WriteString(action)
	return b.String()
}

func (f *failpointFault) Apply(ctx context.Context, env Env) error {
	members, err := f.members(env)
	if err != nil {
		return err
	}
	for _, m := range members {
		if err := f.checkRole(env, m, f.roles); err != nil {
			return err
		}
	}
	if f.applied == nil {
		f.applied = map[string]Failpoints{}
	}
	for _, m := range members {
		api, err := env.Failpoints(m)
		if err != nil {
			return f.wrap(err, "failpoint API of %s", m)
		}
		if _, err := api.Enable(ctx, f.point, f.terms); err != nil {
			return f.wrap(err, "enable %s=%s on %s", f.point, f.terms, m)
		}
		f.applied[m] = api
		f.order = append(f.order, m)
	}
	return nil
}

func (f *failpointFault) Verify(ctx context.Context, _ Env) error {
	var hits, evals, paused int64
	var where []string
	for _, m := range f.order {
		st, err := f.applied[m].Get(ctx, f.point)
		if err != nil {
			return f.wrap(err, "read %s on %s", f.point, m)
		}
		if !st.Enabled {
			return f.errorf("failpoint %s is no longer enabled on %s (process restarted?)", f.point, m)
		}
		hits += st.Hits
		evals += st.Evals
		paused += st.Paused
		if st.Hits > 0 {
			where = append(where, fmt.Sprintf("%s:%d", m, st.Hits))
		}
	}
	if hits == 0 {
		return f.errorf("failpoint %s=%s not hit yet on %s (%d evaluations)", f.point, f.terms, strings.Join(f.order, ","), evals)
	}
	sort.Strings(where)
	f.evidence = fmt.Sprintf("failpoint %s=%s hit %d times (%s), %d paused", f.point, f.terms, hits, strings.Join(where, " "), paused)
	return nil
}

func (f *failpointFault) Revert(ctx context.Context, _ Env) error {
	var errs []error
	for _, m := range f.order {
		if err := f.applied[m].Disable(ctx, f.point); err != nil {
			errs = append(errs, f.wrap(err, "disable %s on %s", f.point, m))
		}
	}
	f.applied, f.order = nil, nil
	return errors.Join(errs...)
}
