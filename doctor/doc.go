// Package doctor is `harness doctor`: the GPU runner's preflight. It checks, without
// running any load, what a night needs — NVML and each GPU (model, memory, the processes
// on it), the model path, free ports, the Python packages of the chosen stack and their
// versions, RDMA devices where the transfer backend wants them, gh, py-spy and free disk
// for the archive — and prints one line per check; each missing thing says how to
// install it, with the versions pinned in Pins.
//
// Checks are pure: Run(cfg, probe) asks a Probe (the machine: System; tests: a fake) and
// returns the lines; Ready says whether none is missing (exit 0, else 1).
//
//	checks := doctor.Run(ctx, doctor.Config{Stack: "sglang", Backend: "mooncake", ...}, doctor.System())
//	doctor.Write(os.Stdout, checks)   // "ok       gpu 0: NVIDIA H100 80GB HBM3, 81559 MiB, 0 processes"
//	if !doctor.Ready(checks) { exit 1 }
package doctor
