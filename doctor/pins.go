package doctor

// Pins are the versions the nightly installs and doctor's install lines cite: one place,
// mirrored by .github/workflows/nightly-gpu-soak.yml's env (a test checks they agree).
// Sources: SGLang's PD disaggregation docs (docs.sglang.io, advanced_features/
// pd_disaggregation: "pip install mooncake-transfer-engine", or nixl; the router from
// sglang-router) and vLLM's NixlConnector docs (pip install nixl); the versions are the
// newest on PyPI when pinned (2026-11). Change them together, with a night to prove it.
var Pins = map[string]string{
	"sglang":                   "0.5.23",
	"sglang-router":            "0.3.2",
	"mooncake-transfer-engine": "0.3.13.post1",
	"nixl":                     "1.5.1",
	"vllm":                     "0.33.0",
	"py-spy":                   "0.4.3",
}

// pipInstall is the install line of a pinned package.
func pipInstall(pkg string) string {
	spec := pkg
	if pkg == "sglang" {
		spec = "sglang[all]"
	}
	if v := Pins[pkg]; v != "" {
		spec += "==" + v
	}
	return `pip install "` + spec + `"`
}
