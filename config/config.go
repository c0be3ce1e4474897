// Package config holds the runtime's own manifests (RBAC, kcp templates, deployment) as
// files a platform team applies, and hands Go code the generic ones it fills in, so a
// test or tool applies exactly what the files say rather than a copy of them.
package config

import (
	_ "embed"
	"strings"
)

//go:embed kcp/runtime-rbac.yaml
var kcpRuntimeRBAC string

// kcpRuntimeRBACExport is how kcp/runtime-rbac.yaml names the APIExport it grants the
// virtual workspace of; the file's comment tells a platform team to replace it.
const kcpRuntimeRBACExport = `resourceNames: ["widgets"]`

// KCPRuntimeRBAC is kcp/runtime-rbac.yaml for the APIExport exportName: the runtime's
// identity (ServiceAccount kcp-serviceprovider/runtime) and its least RBAC in the
// provider workspace.
func KCPRuntimeRBAC(exportName string) []byte {
	return []byte(strings.Replace(kcpRuntimeRBAC, kcpRuntimeRBACExport, `resourceNames: ["`+exportName+`"]`, 1))
}
