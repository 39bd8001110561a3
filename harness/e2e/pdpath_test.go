package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"pdsoak/ledger"
	"pdsoak/reports"
)

// TestPDFallback runs the shipped pd-fallback scenario twice at once on the reference
// PD server, prefill-0 SIGKILLed at 4 s and never restarted:
//   - as shipped (the router's --pd-fallback decode-only): every client request is ok,
//     no silent drop, yet pd_path FAILs, since prefill's own counter stopped rising;
//   - without the knob: the same crash gives explicit 503s, and pd_path PASSes among the
//     requests that completed.
func TestPDFallback(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the reference PD server twice (about 30 s)")
	}
	noKnob := withoutRouterArgs(t, t.TempDir(), "pd-fallback")
	for _, tc := range []struct {
		name, scenario string
		knob           bool
	}{{"knob", "pd-fallback", true}, {"no knob", noKnob, false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := runHarness(t, tc.scenario)
			pdp := assertion(r.res, "pd_path")
			require.NotNil(t, pdp, r.diagnostics())
			pd := *pdp
			require.NotNil(t, r.res.PDPath, r.diagnostics())
			require.NotNil(t, r.res.PDPath.Share)
			assert.Zero(t, r.res.SilentDrops, r.diagnostics())
			if tc.knob {
				assert.Equal(t, 1, r.code, r.diagnostics())
				assert.Equal(t, reports.VerdictFail, r.res.Verdict)
				assert.Equal(t, reports.StateFail, pd.State, pd.Detail)
				// The fallback is silent: the client sees no error but those of the
				// requests whose KV transfer the kill cut mid-flight (explicit, and
				// explained by the declared fault).
				assert.Zero(t, r.res.UnexplainedErrors, r.diagnostics())
				assert.GreaterOrEqual(t, r.res.Outcomes[ledger.OutcomeOK], r.res.Requests-2, "the fallback is silent")
				assert.Less(t, *r.res.PDPath.Share, 0.6, "most requests after the crash went decode-only")
				require.NotNil(t, r.res.PDPath.StoppedAt, "the window where disaggregation stopped is named")
				assert.Contains(t, pd.Detail, "disaggregation stopped in the window from")
				return
			}
			assert.Equal(t, 0, r.code, r.diagnostics())
			assert.Equal(t, reports.StatePass, pd.State, pd.Detail)
			assert.Positive(t, r.res.Outcomes[ledger.OutcomeRejected], "the crash gives explicit refusals")
			assert.GreaterOrEqual(t, *r.res.PDPath.Share, 0.99)
		})
	}
}

// withoutRouterArgs writes scenario name with reference.router_args removed into dir.
func withoutRouterArgs(t *testing.T, dir, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "scenarios", name+".yaml"))
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, yaml.Unmarshal(data, &doc))
	ref := doc["reference"].(map[string]any)
	delete(ref, "router_args")
	doc["name"] = name + "-no-knob"
	out, err := yaml.Marshal(doc)
	require.NoError(t, err)
	p := filepath.Join(dir, fmt.Sprintf("%s-no-knob.yaml", name))
	require.NoError(t, os.WriteFile(p, out, 0o644))
	return p
}
