package explore

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"pdsoak/ledger"
	"pdsoak/reports"
	"pdsoak/scenarios"
)

func loadWedge(t *testing.T, text string) *scenarios.Scenario {
	t.Helper()
	sc, err := parseWedge(text)
	require.NoError(t, err)
	return sc
}

func parseWedge(text string) (*scenarios.Scenario, error) {
	return scenarios.Parse("wedge.yaml", []byte(text), scenarios.WithFaultTypes(testFaultTypes()))
}

func sigReport(rep *Report, sig string) *SignatureReport {
	for i := range rep.Signatures {
		if rep.Signatures[i].Signature == sig {
			return &rep.Signatures[i]
		}
	}
	return nil
}

const wedgeSig = "no_silent_drops@decode:prealloc"

// TestSearchFindsAndShrinksWedge: the search finds the wedge, names it by assertion
// and stage, counts every run, and shrinks the first failing run to the boundary: 9
// agents (the least above 8), --max-total-tokens=999 (the largest failing value below
// the range's high bound), the fewest turns and no fault. The written file loads with
// the strict loader and reproduces the same ledger.
func TestSearchFindsAndShrinksWedge(t *testing.T) {
	sc := loadWedge(t, wedgeScenario)
	out := t.TempDir()
	fake := &fakeSim{}
	var progress strings.Builder
	rep, err := Search(context.Background(), sc, Options{
		Run: fake.run, Runs: 200, Parallel: 2, Seed: 1, OutDir: out,
		FaultTypes: testFaultTypes(), Progress: &progress,
	})
	require.NoError(t, err)
	require.Equal(t, 200, rep.Runs)
	assert.Equal(t, rep.Runs, rep.Passed+rep.Failed+rep.Invalid+rep.Errors)
	assert.Zero(t, rep.Errors, "errors: %v", rep.ErrorMessages)
	assert.Zero(t, rep.Invalid, "invalid: %v", rep.InvalidReasons)

	// Every run's verdict is the one its parameters call for.
	space := NewSpace(sc, testFaultTypes(), nil)
	counts := map[string]int{}
	for i, r := range rep.Results {
		require.Equal(t, i, r.Index)
		drops, trunc := wedge(space.Apply(space.Draw(1, i)))
		want := ""
		switch { // the fake's drops hide its truncations (turn 2 on never answers)
		case drops:
			want = wedgeSig
		case trunc:
			want = "valid_responses"
		}
		assert.Equal(t, want, r.Signature, "run %d", i)
		if want != "" {
			counts[want]++
		}
	}
	require.NotZero(t, counts[wedgeSig], "the search never hit the wedge")
	for _, s := range rep.Signatures {
		assert.Equal(t, counts[s.Signature], s.Count, s.Signature)
	}

	s := sigReport(rep, wedgeSig)
	require.NotNil(t, s)
	assert.FileExists(t, filepath.Join(out, s.RunDir, ledger.EventsFile), "the first failing run is kept")
	sh := s.Shrunk
	require.NotNil(t, sh)
	require.Empty(t, sh.Error)
	assert.True(t, sh.Reproduced)
	assert.True(t, sh.LedgerIdentical)
	assert.Equal(t, "shrunk-no_silent_drops-decode-prealloc.yaml", sh.File)
	assert.Equal(t, 9, sh.Params.Workloads[0].Agents)
	assert.Equal(t, 2, sh.Params.Workloads[0].Turns)
	require.Len(t, sh.Params.Flags, 1)
	assert.Equal(t, "--max-total-tokens=999", sh.Params.Flags[0].Arg())
	assert.Empty(t, sh.Params.Faults)
	assert.Equal(t, s.Seed, sh.Params.Seed, "shrinking keeps the seed")
	assert.NotEmpty(t, sh.Steps)
	assert.LessOrEqual(t, sh.Runs, DefaultMaxShrinkRuns)

	// The file: strict loader, the exact seed, a header that says how it was found.
	path := filepath.Join(out, sh.File)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	text := string(data)
	assert.Contains(t, text, "(explore seed 1)")
	assert.Contains(t, text, "run "+strconv.Itoa(s.FirstRun)+",")
	assert.Contains(t, text, "Expected verdict: FAIL")
	assert.NotContains(t, text, "explore:")
	loaded, err := scenarios.Load(path, scenarios.WithFaultTypes(testFaultTypes()))
	require.NoError(t, err)
	assert.Equal(t, s.Seed, loaded.Seed)
	assert.Equal(t, 9, loaded.Workloads[0].Agents)
	assert.Contains(t, loaded.Reference.DecodeArgs, "--max-total-tokens=999")
	assert.Contains(t, loaded.Reference.DecodeArgs, "--context-length=4096", "the scenario's own flags stay")
	assert.Empty(t, loaded.Faults)
	// Replayed with the fake, it fails the same way, byte for byte.
	dir := t.TempDir()
	require.NoError(t, fake.run(context.Background(), loaded, dir))
	res, err := reports.ComputeFile(filepath.Join(dir, ledger.EventsFile), reportConfig(loaded))
	require.NoError(t, err)
	assert.Equal(t, wedgeSig, Signature(res))
	a, _ := os.ReadFile(filepath.Join(dir, ledger.EventsFile))
	b, _ := os.ReadFile(filepath.Join(out, sh.RunDir, ledger.EventsFile))
	assert.Equal(t, string(b), string(a))
	assert.FileExists(t, filepath.Join(out, sh.RunDir, reports.ResultsFile))

	// explore.json is the same report.
	var disk Report
	raw, err := os.ReadFile(filepath.Join(out, ReportFile))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &disk))
	assert.Equal(t, 200, disk.Runs)
	assert.Equal(t, len(rep.Signatures), len(disk.Signatures))
	assert.Equal(t, int64(1), disk.ExploreSeed)
	assert.Contains(t, progress.String(), "fails: "+wedgeSig)

	// The table names every signature and its shrunk file.
	var table strings.Builder
	require.NoError(t, WriteTable(&table, rep))
	assert.Contains(t, table.String(), "200 runs")
	assert.Contains(t, table.String(), wedgeSig)
	assert.Contains(t, table.String(), sh.File)

	// No leftover run directories.
	ents, err := os.ReadDir(out)
	require.NoError(t, err)
	for _, e := range ents {
		assert.False(t, strings.HasPrefix(e.Name(), ".runs-"), "left %s", e.Name())
	}
}

// TestEachSignatureShrunk: every distinct signature gets its own shrunk file, and the
// valid_responses one shrinks to 7 turns and the fewest agents, its flag dropped.
func TestEachSignatureShrunk(t *testing.T) {
	sc := loadWedge(t, wedgeScenario)
	out := t.TempDir()
	rep, err := Search(context.Background(), sc, Options{Run: (&fakeSim{}).run, Runs: 120, Parallel: 2, Seed: 7, OutDir: out, FaultTypes: testFaultTypes()})
	require.NoError(t, err)
	s := sigReport(rep, "valid_responses")
	require.NotNil(t, s, "signatures: %+v", rep.Signatures)
	require.NotNil(t, s.Shrunk)
	assert.Equal(t, 7, s.Shrunk.Params.Workloads[0].Turns)
	assert.Equal(t, 5, s.Shrunk.Params.Workloads[0].Agents)
	assert.Empty(t, s.Shrunk.Params.Flags, "the flag does not matter to this failure")
	files := map[string]bool{}
	for _, s := range rep.Signatures {
		require.NotNil(t, s.Shrunk)
		assert.True(t, s.Shrunk.Reproduced, s.Signature)
		assert.False(t, files[s.Shrunk.File], "two signatures wrote %s", s.Shrunk.File)
		files[s.Shrunk.File] = true
		assert.FileExists(t, filepath.Join(out, s.Shrunk.File))
	}
}

// TestDeterministicAcrossParallel: run i's parameters and result depend on (seed, i)
// only, not on how many runs go at once.
func TestDeterministicAcrossParallel(t *testing.T) {
	sc := loadWedge(t, wedgeScenario)
	search := func(parallel int) *Report {
		rep, err := Search(context.Background(), sc, Options{Run: (&fakeSim{}).run, Runs: 60, Parallel: parallel, Seed: 3, OutDir: t.TempDir(), NoShrink: true, FaultTypes: testFaultTypes()})
		require.NoError(t, err)
		return rep
	}
	one, three := search(1), search(3)
	require.Len(t, one.Results, 60)
	require.Len(t, three.Results, 60)
	for i := range one.Results {
		a, b := one.Results[i], three.Results[i]
		assert.Equal(t, a.Index, b.Index)
		assert.Equal(t, a.Seed, b.Seed)
		assert.Equal(t, a.Signature, b.Signature, "run %d", i)
		assert.Equal(t, a.Ledger, b.Ledger, "run %d ledger", i)
	}
	assert.Equal(t, one.Signatures, three.Signatures)
}

// TestRunsBudget: the search makes exactly --runs runs.
func TestRunsBudget(t *testing.T) {
	sc := loadWedge(t, wedgeScenario)
	fake := &fakeSim{}
	rep, err := Search(context.Background(), sc, Options{Run: fake.run, Runs: 17, Parallel: 4, Seed: 1, OutDir: t.TempDir(), NoShrink: true, FaultTypes: testFaultTypes()})
	require.NoError(t, err)
	assert.Equal(t, int64(17), fake.calls.Load())
	assert.Equal(t, 17, rep.Runs)
	for _, s := range rep.Signatures {
		assert.Nil(t, s.Shrunk, "--no-shrink")
	}
}

// TestTimeBudget: with a time budget the search stops handing out runs once it is
// spent; the clock is the test's, moved by each run.
func TestTimeBudget(t *testing.T) {
	sc := loadWedge(t, wedgeScenario)
	clock := &fakeClock{now: epoch}
	fake := &fakeSim{tick: func() { clock.Advance(100 * time.Millisecond) }}
	rep, err := Search(context.Background(), sc, Options{Run: fake.run, Time: time.Second, Parallel: 1, Seed: 1, OutDir: t.TempDir(), NoShrink: true, FaultTypes: testFaultTypes(), Now: clock.Now})
	require.NoError(t, err)
	assert.Equal(t, 10, rep.Runs)
	assert.Equal(t, int64(10), fake.calls.Load())
	assert.InDelta(t, 1.0, rep.Elapsed, 1e-9)
	assert.Equal(t, "1s", rep.Budget.Time)

	// Both budgets: whichever is spent first.
	clock2 := &fakeClock{now: epoch}
	fake2 := &fakeSim{tick: func() { clock2.Advance(100 * time.Millisecond) }}
	rep, err = Search(context.Background(), sc, Options{Run: fake2.run, Runs: 4, Time: time.Hour, Parallel: 2, Seed: 1, OutDir: t.TempDir(), NoShrink: true, FaultTypes: testFaultTypes(), Now: clock2.Now})
	require.NoError(t, err)
	assert.Equal(t, 4, rep.Runs)
}

// TestEveryRunErrors: a run function that always fails is an infrastructure error, and
// the report says why.
func TestEveryRunErrors(t *testing.T) {
	sc := loadWedge(t, wedgeScenario)
	fake := &fakeSim{err: errors.New("sim: not wired")}
	rep, err := Search(context.Background(), sc, Options{Run: fake.run, Runs: 5, Parallel: 2, Seed: 1, OutDir: t.TempDir(), FaultTypes: testFaultTypes()})
	require.ErrorContains(t, err, "sim: not wired")
	require.NotNil(t, rep)
	assert.Equal(t, 5, rep.Errors)
	require.Len(t, rep.ErrorMessages, 1)
	assert.Equal(t, 5, rep.ErrorMessages[0].Count)
}

// TestInterrupted: a cancelled context stops the search with a partial report.
func TestInterrupted(t *testing.T) {
	sc := loadWedge(t, wedgeScenario)
	ctx, cancel := context.WithCancel(context.Background())
	fake := &fakeSim{}
	fake.tick = func() {
		if fake.calls.Load() == 3 {
			cancel()
		}
	}
	rep, err := Search(ctx, sc, Options{Run: fake.run, Runs: 1000, Parallel: 1, Seed: 1, OutDir: t.TempDir(), FaultTypes: testFaultTypes()})
	require.ErrorIs(t, err, context.Canceled)
	require.NotNil(t, rep)
	assert.True(t, rep.Interrupted)
	assert.Equal(t, 3, rep.Runs)
}

func TestExternalTargetRefused(t *testing.T) {
	tests := []struct {
		name, extra, path string
		line              int
	}{
		{"url", "target:\n  url: http://127.0.0.1:30000\n", "target.url", 19},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			text := strings.Replace(wedgeScenario, "faults:\n  - {name: kill, type: decode_crash, target: decode-0, at: 5s, for: 2s}\n", "", 1)
			sc, err := scenarios.Parse("wedge.yaml", []byte(text+tc.extra))
			require.NoError(t, err)
			_, err = Search(context.Background(), sc, Options{Run: (&fakeSim{}).run, OutDir: t.TempDir()})
			var ps scenarios.Problems
			require.ErrorAs(t, err, &ps)
			require.Len(t, ps, 1)
			assert.Equal(t, tc.path, ps[0].Path)
			assert.Equal(t, tc.line, ps[0].Line)
			assert.Contains(t, ps[0].Msg, "only under simulation")
		})
	}
}

// TestShippedExploreIncident: the shipped explore-incident gives only the pool's range;
// on the fake it is found and shrunk to the fake's boundary (more than 8 agents, a pool
// under 1000 tokens, a second turn).
func TestShippedExploreIncident(t *testing.T) {
	sc, err := scenarios.Load("explore-incident", scenarios.WithFaultTypes(testFaultTypes()))
	require.NoError(t, err)
	fake := &fakeSim{}
	rep, err := Search(context.Background(), sc, Options{Run: fake.run, Runs: 40, Seed: 1, OutDir: t.TempDir(), FaultTypes: testFaultTypes()})
	require.NoError(t, err)
	s := sigReport(rep, wedgeSig)
	require.NotNil(t, s, "signatures: %+v", rep.Signatures)
	require.NotNil(t, s.Shrunk)
	p := s.Shrunk.Params
	assert.Equal(t, 9, p.Workloads[0].Agents)
	assert.Equal(t, 2, p.Workloads[0].Turns)
	require.Len(t, p.Flags, 1)
	assert.Equal(t, "--max-total-tokens=999", p.Flags[0].Arg())
	assert.True(t, s.Shrunk.Reproduced)
}

// crashSim fails a run with silent drops held at decode's "restarting" stage when a
// decode_crash of at least 3s is injected; every other fault is harmless.
func crashSim(_ context.Context, sc *scenarios.Scenario, outDir string) error {
	crash := false
	for _, f := range sc.Faults {
		if f.Type == "decode_crash" && f.Target == "decode-0" && f.For >= scenarios.Duration(3*time.Second) {
			crash = true
		}
	}
	w, err := ledger.Create(filepath.Join(outDir, ledger.EventsFile), nil)
	if err != nil {
		return err
	}
	w.Emit(ledger.Event{Time: epoch, Type: ledger.EventRunStart, Scenario: sc.Name, Seed: sc.Seed})
	s := epoch.Add(time.Second)
	done := ledger.Event{Time: s.Add(time.Second), Type: ledger.EventDone, RequestID: "r1", Workload: "agents", Scheduled: &s, Outcome: ledger.OutcomeOK, E2E: 1}
	if crash {
		done.Outcome, done.Age = ledger.OutcomeStalled, 5
		done.ServerDebug = json.RawMessage(`{"sources":[{"process":"decode-0","entries":[{"stage":"restarting"}]}]}`)
	}
	w.Emit(ledger.Event{Time: s, Type: ledger.EventScheduled, RequestID: "r1", Workload: "agents"})
	w.Emit(done)
	w.Emit(ledger.Event{Time: epoch.Add(time.Minute), Type: ledger.EventRunEnd})
	return w.Close()
}

// TestShrinkFaults: the one fault that matters is kept, its window shortened to the
// least that still fails (3s), every other fault dropped, and the load shortened to
// end with it.
func TestShrinkFaults(t *testing.T) {
	text := strings.Replace(wedgeScenario, "explore:\n", "explore:\n  faults: catalogue\n  max_faults: 4\n  fault_for: [1s, 15s]\n", 1)
	sc := loadWedge(t, text)
	rep, err := Search(context.Background(), sc, Options{Run: crashSim, Runs: 60, Parallel: 2, Seed: 11, OutDir: t.TempDir(), FaultTypes: testFaultTypes()})
	require.NoError(t, err)
	s := sigReport(rep, "no_silent_drops@decode:restarting")
	require.NotNil(t, s, "signatures: %+v", rep.Signatures)
	require.Greater(t, len(s.Params.Faults), 1, "pick a seed whose first failing run has more than the one fault that matters")
	sh := s.Shrunk
	require.NotNil(t, sh)
	require.Len(t, sh.Params.Faults, 1, "%+v", sh.Params.Faults)
	f := sh.Params.Faults[0]
	assert.Equal(t, "decode_crash", f.Type)
	assert.Equal(t, "decode-0", f.Target)
	assert.Equal(t, scenarios.Duration(3*time.Second), f.For)
	assert.Equal(t, f.At+f.For, sh.Params.Duration, "the load ends with the fault")
	assert.Equal(t, 5, sh.Params.Workloads[0].Agents)
	assert.True(t, sh.Reproduced)
	assert.True(t, sh.LedgerIdentical)
}
