package cli

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestK8sRenderWarnsAndRefuses: render without --target says on stderr that each shard
// starts its own server and the faults reach only shard 1's, and notes the RWX claim;
// with --target, a scenario with process faults is refused (exit 2) with the reason and
// the alternatives, and nothing is printed on stdout.
func TestK8sRenderWarnsAndRefuses(t *testing.T) {
	code, out, errOut := execute(t, []string{"k8s", "render", "decode-crash", "--shards", "3", "--image", "pdsoak:dev", "--storage-class", "nfs-client"})
	assert.Equal(t, ExitPass, code, errOut)
	assert.Contains(t, out, "kind: PersistentVolumeClaim")
	assert.Contains(t, out, "storageClassName: nfs-client")
	assert.Contains(t, errOut, "each of the 3 shards starts its own embedded reference server")
	assert.Contains(t, errOut, "reach only shard 1's server")
	assert.Contains(t, errOut, "storage class nfs-client for ReadWriteMany")
	assert.Contains(t, errOut, "fsGroup 65532")

	code, out, errOut = execute(t, []string{"k8s", "render", "decode-crash", "--shards", "3", "--image", "pdsoak:dev", "--target", "http://pdsoak-router.ns.svc:30000"})
	assert.Equal(t, ExitUsage, code)
	assert.Empty(t, out)
	assert.Contains(t, errOut, "fault kill-decode (decode_crash on decode) acts on a process the harness starts")
	assert.Contains(t, errOut, "Alternatives: render without --target")
}
