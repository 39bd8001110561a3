package cli

import (
	"github.com/spf13/pflag"

	"pdsoak/server/api"
	"pdsoak/server/failpoint"
)

// The router's failpoint admin API (--enable-fault-injection), as the workers have it:
// the failpoints every process evaluates (api/health, which makes /health lie) are then
// reachable on the router too. The token is resolved as the workers resolve theirs.
type routerFaults struct {
	enable    bool
	tokenFile string
}

func (f *routerFaults) register(fs *pflag.FlagSet) {
	fs.BoolVar(&f.enable, "enable-fault-injection", false,
		"serve the failpoint admin API under /admin/ (loopback only; its bearer token comes from $"+FaultTokenEnv+" or --fault-injection-token-file)")
	fs.StringVar(&f.tokenFile, "fault-injection-token-file", "", "file holding the failpoint admin API's bearer token (read once, trimmed; overrides $"+FaultTokenEnv+")")
}

// adminOption is the API option that mounts the admin handler (nil when off).
func (f *routerFaults) adminOption() (api.Option, error) {
	w := &workerFlags{enableFaultInjection: f.enable, faultTokenFile: f.tokenFile}
	if err := w.resolveFaultToken(); err != nil || !f.enable {
		return nil, err
	}
	return api.WithAdminHandler(failpoint.AdminHandler(w.faultToken)), nil
}
