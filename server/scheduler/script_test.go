package scheduler

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"pdsoak/server/gen"
)

var update = flag.Bool("update", false, "rewrite the expected output of testdata scripts")

// A script is a sequence of blocks, each a command, a "----" line and the expected
// output, ended by a blank line. Lines starting with '#' between blocks are comments.
//
//	arrive id=a prompt=5 max=3
//	----
//	ok seq=1
type block struct {
	line     int
	cmd      string
	args     map[string]string
	keys     []string
	expected string
}

// parseScript parses a script. It never panics on bad input.
func parseScript(src string) ([]block, error) {
	lines := strings.Split(strings.ReplaceAll(src, "\r\n", "\n"), "\n")
	var out []block
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		b := block{line: i + 1, args: map[string]string{}}
		fields := strings.Fields(l)
		b.cmd = fields[0]
		for _, f := range fields[1:] {
			k, v, _ := strings.Cut(f, "=")
			if k == "" {
				return nil, fmt.Errorf("line %d: empty argument name in %q", i+1, f)
			}
			if _, dup := b.args[k]; dup {
				return nil, fmt.Errorf("line %d: argument %q given twice", i+1, k)
			}
			b.args[k] = v
			b.keys = append(b.keys, k)
		}
		i++
		if i >= len(lines) || strings.TrimSpace(lines[i]) != "----" {
			return nil, fmt.Errorf("line %d: command %q must be followed by a ---- line", b.line, b.cmd)
		}
		var exp []string
		for i+1 < len(lines) && strings.TrimSpace(lines[i+1]) != "" {
			i++
			exp = append(exp, strings.TrimRight(lines[i], " \t"))
		}
		b.expected = strings.Join(exp, "\n")
		out = append(out, b)
	}
	return out, nil
}

func formatScript(blocks []block) string {
	var sb strings.Builder
	for i, b := range blocks {
		if i > 0 {
			sb.WriteString("\n")
		}
		sb.WriteString(b.cmd)
		for _, k := range b.keys {
			sb.WriteString(" " + k)
			if v := b.args[k]; v != "" {
				sb.WriteString("=" + v)
			}
		}
		sb.WriteString("\n----\n")
		if b.expected != "" {
			sb.WriteString(b.expected + "\n")
		}
	}
	return sb.String()
}

// runner executes script commands against a scheduler with an injected clock.
type runner struct {
	t0    time.Time
	now   time.Time
	s     *Scheduler
	cfg   Config
	ids   map[string]uint64
	names map[uint64]string
}

func newRunner() *runner {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return &runner{t0: t0, now: t0, cfg: testConfig(), ids: map[string]uint64{}, names: map[uint64]string{}}
}

func testConfig() Config {
	// Every timeout off unless a script sets it (0 would take the semantics' default).
	off := -time.Nanosecond
	return Config{Role: RoleColocated, Pages: 16, VocabSize: 300, EOS: 1, Limits: Limits{
		Semantics: SemanticsStrict, PageSize: 4, MemFractionStatic: 1,
		MaxRunningRequests: 4, ContextLength: 256, MaxPrefillTokens: 64, RetryAfter: time.Second, DecodeLogInterval: 40,
		WatchdogTimeout: off, BootstrapTimeout: off, PreallocTimeout: off, TransferTimeout: off,
		WaitingTimeout: off, RunningTimeout: off, RequestTimeout: off,
	}}
}

// scriptDur reads a timeout of a config line; 0 is off, as in the scheduler's plans
// (Limits would read it as the semantics' default).
func scriptDur(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if d == 0 {
		d = -time.Nanosecond
	}
	return d, err
}

func argInt(b block, k string, def int) (int, error) {
	v, ok := b.args[k]
	if !ok {
		return def, nil
	}
	return strconv.Atoi(v)
}

func argDur(b block, k string) (time.Duration, error) {
	v, ok := b.args[k]
	if !ok {
		return 0, nil
	}
	return time.ParseDuration(v)
}

func (rn *runner) exec(b block) (string, error) {
	switch b.cmd {
	case "config":
		c := testConfig()
		for _, k := range b.keys {
			v := b.args[k]
			var err error
			switch k {
			case "role":
				c.Role = Role(v)
			case "semantics":
				c.Semantics = Semantics(v)
			case "pages":
				if c.Pages, err = strconv.Atoi(v); err == nil && c.Pages > 1<<16 {
					err = errors.New("too many pages for a test")
				}
			case "page_size":
				c.PageSize, err = strconv.Atoi(v)
			case "max_queued":
				c.MaxQueuedRequests, err = strconv.Atoi(v)
			case "max_running":
				c.MaxRunningRequests, err = strconv.Atoi(v)
			case "bs":
				c.CudaGraphMaxBS, err = strconv.Atoi(v)
			case "context":
				c.ContextLength, err = strconv.Atoi(v)
			case "prefill_budget":
				c.MaxPrefillTokens, err = strconv.Atoi(v)
			case "chunk":
				c.ChunkedPrefillSize, err = strconv.Atoi(v)
			case "reserved":
				c.ReservedDecodeTokens, err = strconv.Atoi(v)
			case "log_interval":
				c.DecodeLogInterval, err = strconv.Atoi(v)
			case "bootstrap":
				c.BootstrapTimeout, err = scriptDur(v)
			case "prealloc":
				c.PreallocTimeout, err = scriptDur(v)
			case "transfer":
				c.TransferTimeout, err = scriptDur(v)
			case "waiting":
				c.WaitingTimeout, err = scriptDur(v)
			case "running":
				c.RunningTimeout, err = scriptDur(v)
			case "total":
				c.RequestTimeout, err = scriptDur(v)
			case "watchdog":
				c.WatchdogTimeout, err = scriptDur(v)
			case "radix":
				c.RadixCache = v == "on"
			case "bug":
				err = c.SGLangBugs.Set(v)
			default:
				return "", fmt.Errorf("unknown config key %q", k)
			}
			if err != nil {
				return "", fmt.Errorf("config %s: %w", k, err)
			}
		}
		s, err := New(c)
		if err != nil {
			return "error: " + err.Error(), nil
		}
		rn.s, rn.cfg = s, c
		return "ok", nil
	case "at":
		if len(b.keys) != 1 {
			return "", errors.New("at needs one duration")
		}
		d, err := time.ParseDuration(b.keys[0])
		if err != nil {
			return "", err
		}
		rn.now = rn.t0.Add(d)
		return "", nil
	}
	if rn.s == nil {
		return "", errors.New("config must come first")
	}
	switch b.cmd {
	case "arrive":
		id := b.args["id"]
		req := &gen.Request{ID: id}
		if p, ok := b.args["prompt"]; ok {
			if n, err := strconv.Atoi(p); err == nil {
				if n > 1<<16 {
					return "", errors.New("prompt too long for a test")
				}
				for i := range n {
					req.Prompt = append(req.Prompt, 10+i%200)
				}
			} else {
				for _, f := range strings.Split(p, ",") {
					t, err := strconv.Atoi(f)
					if err != nil {
						return "", err
					}
					req.Prompt = append(req.Prompt, t)
				}
			}
		}
		var err error
		if req.MaxTokens, err = argInt(b, "max", 4); err != nil {
			return "", err
		}
		if _, ok := b.args["ignore_eos"]; ok {
			req.IgnoreEOS = true
		}
		if d, err := argDur(b, "deadline"); err != nil {
			return "", err
		} else if d > 0 {
			req.Deadline = rn.t0.Add(d)
		}
		if room, ok := b.args["room"]; ok {
			n, err := strconv.ParseUint(room, 10, 64)
			if err != nil {
				return "", err
			}
			req.Bootstrap = &gen.Bootstrap{Room: n, Addr: b.args["addr"]}
		}
		seq, aerr := rn.s.Arrive(rn.now, req)
		if aerr != nil {
			return "refused: " + errKind(aerr) + ": " + aerr.Error(), nil
		}
		rn.ids[id], rn.names[seq] = seq, id
		return fmt.Sprintf("ok seq=%d", seq), nil
	case "ready":
		rd := rn.s.Ready(rn.now)
		return rn.render(&rd, b.args["stats"] != "" || hasKey(b, "stats")), nil
	case "step":
		out := make([]int, len(rn.s.batch))
		def, err := argInt(b, "tok", 7)
		if err != nil {
			return "", err
		}
		for i, r := range rn.s.batch {
			out[i] = def
			if v, ok := b.args[rn.names[r.seq]]; ok {
				if out[i], err = strconv.Atoi(v); err != nil {
					return "", err
				}
			}
		}
		var serr error
		if e, ok := b.args["err"]; ok {
			serr = errors.New(e)
		}
		rn.s.StepDone(rn.now, out, serr)
		return "", nil
	case "tick":
		rn.s.Tick(rn.now)
		return "", nil
	case "abort":
		return fmt.Sprint(rn.s.Abort(rn.now, rn.ids[b.args["id"]], nil)), nil
	case "registered":
		room, err := strconv.ParseUint(b.args["room"], 10, 64)
		if err != nil {
			return "", err
		}
		rn.s.Registered(rn.now, room)
		return "", nil
	case "received", "sent":
		room, err := strconv.ParseUint(b.args["room"], 10, 64)
		if err != nil {
			return "", err
		}
		var terr error
		if e, ok := b.args["err"]; ok {
			terr = errors.New(e)
		}
		if b.cmd == "sent" {
			return fmt.Sprint(rn.s.Sent(rn.now, room, terr)), nil
		}
		tok, err := argInt(b, "tok", 7)
		if err != nil {
			return "", err
		}
		return fmt.Sprint(rn.s.Received(rn.now, room, tok, terr)), nil
	case "stats":
		return renderStats(rn.s.Stats()), nil
	case "health":
		if err := rn.s.Health(rn.now); err != nil {
			return "unhealthy: " + err.Error(), nil
		}
		return "healthy", nil
	case "requests":
		var lines []string
		for _, ri := range rn.s.Requests(rn.now) {
			room := ""
			if ri.Room != nil {
				room = fmt.Sprintf(" room=%d", *ri.Room)
			}
			if ri.CachedPrefixTokens > 0 {
				room += fmt.Sprintf(" cached_prefix=%d", ri.CachedPrefixTokens)
			}
			lines = append(lines, fmt.Sprintf("%s stage=%s age=%.0fs stage_age=%.0fs prompt=%d output=%d pages=%d%s",
				ri.ID, ri.Stage, ri.AgeSeconds, ri.StageAgeSeconds, ri.PromptTokens, ri.OutputTokens, ri.Pages, room))
		}
		return strings.Join(lines, "\n"), nil
	}
	return "", fmt.Errorf("unknown command %q", b.cmd)
}

func hasKey(b block, k string) bool { _, ok := b.args[k]; return ok }

func errKind(err error) string {
	kind := gen.ErrorKind(err)
	var se *gen.StageError
	if errors.As(err, &se) {
		kind += "@" + se.Stage
	}
	return kind
}

func renderStats(st Stats) string {
	s := fmt.Sprintf("stats running=%d waiting=%d bootstrap=%d prealloc=%d transfer=%d inflight=%d retracted=%d queued=%d pages=%d/%d",
		st.Running, st.Waiting, st.Bootstrap, st.Prealloc, st.Transfer, st.Inflight, st.Retracted, st.Queued, st.UsedPages, st.TotalPages)
	if st.CacheQueriedTokens > 0 || st.CachedPages > 0 {
		s += fmt.Sprintf(" cache=%d locked_nodes=%d hit=%d/%d evicted=%d", st.CachedPages, st.LockedNodes, st.CacheHitTokens, st.CacheQueriedTokens, st.EvictedPages)
	}
	return s
}

func (rn *runner) render(rd *Ready, withStats bool) string {
	var lines []string
	name := func(seq uint64) string { return rn.names[seq] }
	if rd.Batch != nil {
		var parts []string
		for i, in := range rd.Batch {
			parts = append(parts, fmt.Sprintf("%s(pos=%d,n=%d,pages=%d)", name(rd.BatchSeqs[i]), in.Pos, len(in.Tokens), len(in.Pages)))
		}
		lines = append(lines, fmt.Sprintf("batch prefill=%d decode=%d: %s", rd.PrefillTokens, rd.DecodeTokens, strings.Join(parts, " ")))
	}
	var moves []string
	for _, m := range rd.Moves {
		from, to := string(m.From), string(m.To)
		if from == "" {
			from = "new"
		}
		if to == "" {
			to = "done"
		}
		moves = append(moves, fmt.Sprintf("%s:%s>%s", name(m.Seq), from, to))
	}
	if len(moves) > 0 {
		lines = append(lines, "moves "+strings.Join(moves, " "))
	}
	for _, e := range rd.Emits {
		lines = append(lines, fmt.Sprintf("emit %s %v", name(e.Seq), e.Tokens))
	}
	for _, f := range rd.Finished {
		if f.Err != nil {
			lines = append(lines, fmt.Sprintf("finish %s error=%s (%v) completion=%d", name(f.Seq), errKind(f.Err), f.Err, f.CompletionTokens))
		} else {
			lines = append(lines, fmt.Sprintf("finish %s %s completion=%d", name(f.Seq), f.Reason, f.CompletionTokens))
		}
	}
	for _, t := range rd.Transfers {
		lines = append(lines, fmt.Sprintf("transfer %s room=%d addr=%s pages=%v tokens=%d", name(t.Seq), t.Room, t.Addr, t.Pages, t.NumTokens))
	}
	for _, s := range rd.Sends {
		lines = append(lines, fmt.Sprintf("send %s room=%d pages=%v tokens=%d first=%d", name(s.Seq), s.Room, s.Pages, s.NumTokens, s.FirstToken))
	}
	for _, c := range rd.Cancels {
		lines = append(lines, fmt.Sprintf("cancel %s room=%d", name(c.Seq), c.Room))
	}
	if len(rd.Retracted) > 0 {
		var n []string
		for _, seq := range rd.Retracted {
			n = append(n, name(seq))
		}
		lines = append(lines, "retracted "+strings.Join(n, " "))
	}
	if rd.PagesFreed > 0 {
		lines = append(lines, fmt.Sprintf("freed %d", rd.PagesFreed))
	}
	if rd.Stats != nil && withStats {
		lines = append(lines, renderStats(*rd.Stats))
	} else if rd.Stats != nil {
		lines = append(lines, "stats refreshed")
	}
	return strings.Join(lines, "\n")
}

func TestScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			src, err := os.ReadFile(f)
			require.NoError(t, err)
			blocks, err := parseScript(string(src))
			require.NoError(t, err)
			rn := newRunner()
			changed := false
			for i, b := range blocks {
				got, err := rn.exec(b)
				if err != nil {
					t.Fatalf("%s:%d: %s: %v", f, b.line, b.cmd, err)
				}
				if got != b.expected {
					if *update {
						blocks[i].expected, changed = got, true
						continue
					}
					t.Errorf("%s:%d: %s\n--- got ---\n%s\n--- want ---\n%s", f, b.line, b.cmd, got, b.expected)
				}
				checkPool(t, rn.s)
			}
			if changed {
				require.NoError(t, os.WriteFile(f, []byte(formatScript(blocks)), 0o644))
			}
		})
	}
}

// checkPool verifies the scheduler's page bookkeeping against the pool.
func checkPool(t *testing.T, s *Scheduler) {
	t.Helper()
	if s == nil {
		return
	}
	held := 0
	seen := map[int32]bool{}
	all := slices.Concat(s.bootstrap, s.prealloc, s.transfer, s.waiting, s.running, s.inflight, s.retracted)
	for _, r := range s.batch {
		if r.done {
			all = append(all, r)
		}
	}
	if s.cfg.Bug(BugPrefillAbortCacheLeak) {
		return // the bug leaks a request's pages on purpose: the script shows them
	}
	for _, r := range all {
		// The pages of a cached prefix are the tree's, shared; the rest are r's own.
		for i, p := range r.pages {
			if i < r.match.Owns() {
				if s.pool.OwnerOf(p) != cacheOwner {
					t.Fatalf("page %d of %s's cached prefix is not the cache's", p, r.id)
				}
				continue
			}
			if seen[p] {
				t.Fatalf("page %d held twice", p)
			}
			seen[p] = true
			held++
		}
	}
	if s.cache != nil {
		if err := s.cache.Check(); err != nil {
			t.Fatal(err)
		}
		held += s.cache.Stats().CachedPages
	}
	if held != s.pool.UsedPages() {
		t.Fatalf("requests and cache hold %d pages, pool says %d used", held, s.pool.UsedPages())
	}
	if len(all) < len(s.reqs) {
		t.Fatalf("%d live requests but %d in queues", len(s.reqs), len(all))
	}
}

func FuzzParseScript(f *testing.F) {
	f.Add("config role=decode\n----\nok\n\narrive id=a prompt=3\n----\nok seq=1\n")
	f.Add("# c\nready stats\n----\n")
	f.Add("x a= =b\n----\n")
	f.Add("a\n")
	f.Fuzz(func(t *testing.T, src string) {
		blocks, err := parseScript(src)
		if err != nil {
			return
		}
		// Formatting and parsing again is stable.
		again, err := parseScript(formatScript(blocks))
		if err != nil {
			t.Fatalf("reparse: %v", err)
		}
		if len(again) != len(blocks) {
			t.Fatalf("reparse: %d blocks, want %d", len(again), len(blocks))
		}
		// Executing never panics.
		rn := newRunner()
		for _, b := range blocks {
			if _, err := rn.exec(b); err != nil {
				return
			}
		}
	})
}
