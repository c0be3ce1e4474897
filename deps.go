package deps

import (
	_ "github.com/kcp-dev/logicalcluster/v3"
	_ "github.com/kcp-dev/multicluster-provider/apiexport"
	_ "github.com/kcp-dev/sdk/apis/apis/v1alpha1"
	_ "github.com/kcp-dev/sdk/apis/apis/v1alpha2"
	_ "github.com/kcp-dev/sdk/apis/tenancy/v1alpha1"
	_ "github.com/openmcp-project/controller-utils/pkg/clusters"
	_ "github.com/openmcp-project/openmcp-operator/api/clusters/v1alpha1"
	_ "github.com/openmcp-project/openmcp-operator/lib/clusteraccess"
	_ "github.com/openmcp-project/openmcp-operator/lib/utils"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "sigs.k8s.io/controller-runtime/pkg/envtest"
	_ "sigs.k8s.io/multicluster-runtime/pkg/builder"
	_ "sigs.k8s.io/multicluster-runtime/providers/single"
)
