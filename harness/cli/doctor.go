package cli

import (
	"os"
	"strings"

	"github.com/spf13/cobra"

	"pdsoak/doctor"
)

func (a *app) doctorCommand() *cobra.Command {
	cfg := doctor.Config{}
	var python string
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check a GPU runner for the nightly without running load: GPUs, Python packages, model, ports, RDMA, disk; exit 0 ready, 1 not ready",
		Long: `doctor checks what the GPU night needs and prints one line per check (ok, warn or
MISSING); each missing thing says how to install it, with the versions the nightly pins:
NVML and each GPU (model, memory, the processes on it), the Python packages of --stack
(sglang: sglang, sglang-router and mooncake-transfer-engine or nixl per --backend; vllm:
vllm and nixl) and their versions, RDMA devices (mooncake), py-spy, gh (--gh), the model
(--model, default $MODEL_PATH), free ports and free disk for the archive.

Exit codes: 0 ready (warnings allowed), 1 not ready, 2 bad usage.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			switch cfg.Backend {
			case "mooncake", "nixl":
			default:
				return usageError("--backend must be mooncake or nixl, got %q", cfg.Backend)
			}
			for _, f := range strings.Split(cfg.Stack, ",") {
				if f != "sglang" && f != "vllm" {
					return usageError("--stack: want sglang, vllm or sglang,vllm, got %q", f)
				}
			}
			if !cmd.Flags().Changed("port") {
				cfg.Ports = doctor.DefaultPorts(cfg.Stack) // the packs of this stack, not SGLang's for vLLM
			}
			checks := doctor.Run(cmd.Context(), cfg, doctor.System(python))
			doctor.Write(cmd.OutOrStdout(), checks)
			if !doctor.Ready(checks) {
				return &ExitError{Code: ExitFail}
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&cfg.Stack, "stack", "sglang", "what the night serves: sglang, vllm or sglang,vllm")
	fs.StringVar(&cfg.Backend, "backend", envOr("TRANSFER_BACKEND", "mooncake"), "SGLang's KV transfer backend: mooncake or nixl (default $TRANSFER_BACKEND, else mooncake)")
	fs.IntVar(&cfg.GPUs, "gpus", 2, "GPUs the packs need (0 skips the GPU check)")
	fs.StringVar(&cfg.ModelPath, "model", envOr("MODEL_PATH", ""), "the model: a local directory or a Hugging Face id (default $MODEL_PATH)")
	fs.IntSliceVar(&cfg.Ports, "port", nil, "ports that must be free (default: the --stack packs' defaults)")
	fs.StringVar(&cfg.Archive, "archive", "nightly", "the nightly archive (free disk is checked on its file system)")
	fs.Float64Var(&cfg.MinFreeGiB, "min-free-gib", 20, "free disk the archive needs, GiB")
	fs.BoolVar(&cfg.NeedGH, "gh", false, "also require the gh CLI")
	fs.StringVar(&python, "python", "python3", "the interpreter whose packages are checked")
	return cmd
}

// envOr is $name, or def when unset or empty.
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
