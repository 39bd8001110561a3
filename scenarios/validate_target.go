package scenarios

import (
	"fmt"
	"maps"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"pdsoak/kernels"
	"pdsoak/server/scheduler"
)

func (v *validator) checkURL(path, s string) {
	if s == "" {
		return
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		v.add(path, "must be an http:// or https:// URL with a host, got %q", s)
	}
}

func (v *validator) checkTarget() {
	sc := v.sc
	if refs := LinkRefs(sc.Target.URL); len(refs) > 0 {
		// The proxy's address is known only when the run starts.
		for _, ref := range refs {
			if !v.hasLink(ref) {
				v.add("target.url", "{link:%s} names no link of target.links", ref)
			}
		}
	} else {
		v.checkURL("target.url", sc.Target.URL)
	}
	v.checkURL("target.metrics_url", sc.Target.MetricsURL)
	v.checkURL("target.debug_url", sc.Target.DebugURL)
	if sc.Target.Model == "" {
		v.add("target.model", "must be set")
	}
	if len(sc.Target.Launch) > 0 && sc.Target.URL == "" {
		v.add("target.launch", "needs target.url: the address where the launched processes serve the API")
	}
	names := map[string]bool{}
	for i, l := range sc.Target.Launch {
		p := fmt.Sprintf("target.launch[%d]", i)
		switch {
		case l.Name == "":
			v.add(p+".name", "must be set")
		case !nameRE.MatchString(l.Name):
			v.add(p+".name", "must be letters, digits, '.', '_' or '-', got %q", l.Name)
		case names[l.Name]:
			v.add(p+".name", "duplicate process name %q", l.Name)
		}
		names[l.Name] = true
		switch l.Role {
		case "router", "prefill", "decode", "colocated":
		default:
			v.add(p+".role", "must be router, prefill, decode or colocated, got %q", l.Role)
		}
		if _, err := SplitWords(l.Launcher); err != nil {
			v.add(p+".launcher", "%s", strings.TrimPrefix(err.Error(), "scenarios: "))
		}
		if _, err := SplitWords(l.ExtraArgs); err != nil {
			v.add(p+".extra_args", "%s", strings.TrimPrefix(err.Error(), "scenarios: "))
		}
		if argv, err := l.Argv(); err == nil && (len(argv) == 0 || argv[0] == "") {
			v.add(p+".command", "must name a program: [program, arg, ...] (or set launcher)")
		}
		v.checkURL(p+".health_url", l.HealthURL)
		v.checkURL(p+".metrics_url", l.MetricsURL)
		if l.StartTimeout < 0 {
			v.add(p+".start_timeout", "must be ≥ 0")
		}
		for j, arg := range l.Command {
			for _, ref := range LinkRefs(arg) {
				if !v.hasLink(ref) {
					v.add(fmt.Sprintf("%s.command[%d]", p, j), "{link:%s} names no link of target.links", ref)
				}
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(sc.Target.MetricsURLs)) {
		p := "target.metrics_urls." + name
		if !nameRE.MatchString(name) {
			v.add(p, "the process name must be letters, digits, '.', '_' or '-', got %q", name)
		}
		if sc.Target.MetricsURLs[name] == "" {
			v.add(p, "must be a URL")
		}
		v.checkURL(p, sc.Target.MetricsURLs[name])
	}
	if len(sc.Target.Links) > 0 && len(sc.Target.Launch) == 0 {
		v.add("target.links", "needs target.launch: the harness can proxy only links of processes it starts")
	}
	lnames := map[string]bool{}
	for i, k := range sc.Target.Links {
		p := fmt.Sprintf("target.links[%d]", i)
		switch {
		case k.Name == "" || strings.ContainsAny(k.Name, " \t{}:"):
			v.add(p+".name", "must be a link name such as router->prefill, got %q", k.Name)
		case lnames[k.Name]:
			v.add(p+".name", "duplicate link name %q", k.Name)
		}
		lnames[k.Name] = true
		if _, port, err := net.SplitHostPort(k.Upstream); err != nil || port == "" {
			v.add(p+".upstream", "must be host:port, got %q", k.Upstream)
		}
	}
}

func (v *validator) hasLink(name string) bool {
	for _, k := range v.sc.Target.Links {
		if k.Name == name {
			return true
		}
	}
	return false
}

// LinkRefs returns the link names an argument refers to with {link:NAME} or
// {link-port:NAME}.
func LinkRefs(arg string) []string {
	var out []string
	for _, m := range linkRefRE.FindAllStringSubmatch(arg, -1) {
		out = append(out, m[2])
	}
	return out
}

// linkRefRE matches {link:NAME} and {link-port:NAME}.
var linkRefRE = regexp.MustCompile(`\{(link|link-port):([^{}\s]+)\}`)

// ExpandLinks replaces {link:NAME} with addr(NAME) (host:port) and {link-port:NAME}
// with its port. It is how a launched command reaches a proxy whose port is chosen only
// when the run starts.
func ExpandLinks(arg string, addr func(name string) (string, error)) (string, error) {
	var firstErr error
	out := linkRefRE.ReplaceAllStringFunc(arg, func(m string) string {
		sub := linkRefRE.FindStringSubmatch(m)
		a, err := addr(sub[2])
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			return m
		}
		if sub[1] == "link-port" {
			if _, port, err := net.SplitHostPort(a); err == nil {
				return port
			}
		}
		return a
	})
	return out, firstErr
}

func (v *validator) checkReference() {
	ref := v.sc.Reference
	if ref.Prefill < 0 {
		v.add("reference.prefill", "must be ≥ 0")
	}
	if ref.Decode < 0 {
		v.add("reference.decode", "must be ≥ 0")
	}
	if (ref.Prefill == 0) != (ref.Decode == 0) {
		v.add("reference", "prefill and decode must both be ≥ 1 (PD) or both 0 (colocated), got %d and %d", ref.Prefill, ref.Decode)
	}
	if ref.Prefill > 16 || ref.Decode > 16 {
		v.add("reference", "at most 16 prefill and 16 decode workers")
	}
	v.oneOf("reference.backend", ref.Backend, kernels.Backends()...)
	v.oneOf("reference.semantics", ref.Semantics, scheduler.SemanticsNames()...)
	if ref.StartTimeout < 0 {
		v.add("reference.start_timeout", "must be ≥ 0")
	}
	if ref.Netns && ref.Prefill == 0 && ref.Decode == 0 {
		v.add("reference.netns", "needs a PD topology (prefill and decode ≥ 1), not colocated")
	}
	if ref.NetnsPrefix != "" && !ref.Netns {
		v.add("reference.netns_prefix", "is set but reference.netns is false")
	}
}

// checkLimits checks the deadlines, the drain, the recovery parameters and the self check.
func (v *validator) checkLimits() {
	sc := v.sc
	d := sc.Deadlines
	for _, f := range []struct {
		name string
		val  Duration
	}{{"connect", d.Connect}, {"first_token", d.FirstToken}, {"stall", d.Stall}, {"total", d.Total}} {
		if f.val <= 0 {
			v.add("deadlines."+f.name, "must be > 0")
		} else if f.name != "total" && d.Total > 0 && f.val > d.Total {
			v.add("deadlines."+f.name, "(%s) must not exceed deadlines.total (%s)", f.val, d.Total)
		}
	}
	if sc.Drain.Timeout <= 0 {
		v.add("drain.timeout", "must be > 0")
	}
	if sc.Drain.LeakTimeout <= 0 {
		v.add("drain.leak_timeout", "must be > 0")
	}
	if r := sc.Recovery; r.Window <= 0 {
		v.add("recovery.window", "must be > 0")
	}
	if r := sc.Recovery; r.Within <= 0 {
		v.add("recovery.within", "must be > 0")
	}
	if r := sc.Recovery; r.Threshold <= 0 || r.Threshold > 1 {
		v.add("recovery.threshold", "must be a fraction in (0, 1], got %g", r.Threshold)
	}
	if sc.SelfCheck.MaxLag <= 0 {
		v.add("self_check.max_lag", "must be > 0")
	}
	if w := sc.Forensics.WedgedAfter; w < 0 || (w > 0 && w.D() < time.Second) {
		v.add("forensics.wedged_after", "must be 0 (off) or at least 1s, got %v", w)
	}
}
